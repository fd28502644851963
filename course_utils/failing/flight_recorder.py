"""The flight recorder: the last collectives each rank entered, dumped when a job fails.

With TORCH_FR_BUFFER_SIZE=N (before init_process_group) PyTorch keeps each rank's last N
collectives in a ring buffer: op, sequence number, sizes, Python stack. NCCL dumps it by itself
on a timeout (to TORCH_FR_DUMP_TEMP_FILE + rank); for gloo this course's programs dump it when
they fail or are stopped (`dump_flight_record`), and `flight_records` / `last_collectives` read
it. PyTorch's analyser (`python -m torch.distributed.flight_recorder.fr_trace DIR`, or
`analyse_flight_records`) matches the ranks' records and names the rank that is missing from a
collective, or that ran a different one. Feature-detected: `flight_recorder_route` says what
this PyTorch offers. Taught in lesson 09.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
from pathlib import Path

import torch

from course_utils.environment import env_int
from course_utils.files import atomic_write


def gloo_dump_available() -> bool:
    """Whether this PyTorch can dump a flight record for gloo (2.6 cannot)."""
    from torch._C import _distributed_c10d as c10d

    return hasattr(c10d, "_dump_fr_trace")


def flight_recorder_route() -> str:
    """What this PyTorch offers: where the recorder's dump comes from, detected, not assumed."""
    if not gloo_dump_available():
        return f"PyTorch {torch.__version__} has no flight recorder for gloo (_dump_fr_trace)"
    return (
        "the flight recorder records gloo's collectives (TORCH_FR_BUFFER_SIZE); gloo does not "
        "dump it on a timeout by itself, so each rank dumps it when it fails or is stopped"
    )


def dump_flight_record(rank: int) -> Path | None:
    """Write this process's flight record to TORCH_FR_DUMP_TEMP_FILE + rank, the name NCCL's
    automatic dump uses; None when recording is off or this PyTorch cannot dump for gloo."""
    from torch._C import _distributed_c10d as c10d

    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    recording = env_int("TORCH_FR_BUFFER_SIZE", default=0) > 0
    if not (prefix and recording and gloo_dump_available()):
        return None
    path = Path(f"{prefix}{rank}")
    if path.exists():  # PyTorch dumped it itself: keep its file
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # without the C++ stack traces: symbolizing them took 6 s of a dump here
        record = c10d._dump_fr_trace(includeStackTraces=False)
    except TypeError:  # a PyTorch whose dump takes no options
        record = c10d._dump_fr_trace()
    atomic_write(path, lambda f: f.write(record))
    return path


def flight_records(folder) -> dict[int, list[dict]]:
    """rank -> the collectives its flight record holds, oldest first (our own dumps: the
    format is a pickle, as PyTorch writes it; read only files you trust)."""
    records = {}
    for path in sorted(Path(folder).glob("*[0-9]")):
        rank = int(re.search(r"(\d+)$", path.name)[1])
        with open(path, "rb") as f:
            records[rank] = pickle.load(f)["entries"]
    return dict(sorted(records.items()))


def last_collectives(records: dict[int, list[dict]]) -> dict[int, str]:
    """rank -> "#seq op sizes" of the last collective each rank entered."""
    last = {}
    for rank, entries in records.items():
        if not entries:
            last[rank] = "none"
            continue
        e = entries[-1]
        op = e["profiling_name"].split(":")[-1]
        last[rank] = f"#{e['collective_seq_id']} {op} {e['input_sizes']}"
    return last


def analyse_flight_records(folder, world_size: int) -> tuple[str, str]:
    """(report, route): PyTorch's analyser (torch.distributed.flight_recorder) run on the dumps.

    PyTorch 2.14's gloo dumps name the default group "" in pg_config but "0" in their entries,
    and the analyser stops with a KeyError; then a copy with the group renamed is analysed,
    and the route says so. Where the analyser is missing or fails, the report is empty and the
    route says why (the records themselves are still there: `flight_records`)."""
    if not list(Path(folder).glob("*[0-9]")):
        return "", f"no flight records in {folder}: {flight_recorder_route()}"
    try:
        return _run_analyser(folder), "the analyser read the dumps as written"
    except ImportError:
        return "", f"PyTorch {torch.__version__} has no torch.distributed.flight_recorder"
    except KeyError:
        pass  # the gloo gap: repair a copy, below
    except Exception as e:  # an analyser of another version that cannot read these dumps
        return "", f"PyTorch's analyser failed on these dumps ({type(e).__name__}: {e})"
    try:
        report = _run_analyser(_with_group_named(folder, world_size))
    except Exception as e:
        return "", f"PyTorch's analyser failed, even on repaired dumps ({type(e).__name__}: {e})"
    return report, "the dumps' group name was repaired (a gloo gap in this PyTorch), then analysed"


def _with_group_named(folder, world_size: int) -> Path:
    """A copy of the dumps whose pg_config names the group as their entries do."""
    repaired = Path(folder).with_name(Path(folder).name + "-renamed")
    shutil.rmtree(repaired, ignore_errors=True)
    repaired.mkdir()
    for path in Path(folder).glob("*[0-9]"):
        with open(path, "rb") as f:
            dump = pickle.load(f)
        group = dump["entries"][0]["process_group"] if dump["entries"] else ("0", "default_pg")
        ranks = str(list(range(world_size)))
        dump["pg_config"] = {group[0]: {"name": group[0], "desc": group[1], "ranks": ranks}}
        atomic_write(repaired / path.name, lambda f, dump=dump: pickle.dump(dump, f))
    return repaired


def _run_analyser(folder) -> str:
    """The analyser's report as text. It logs through its own "Flight Recorder" logger (with a
    handler of its own on stderr, added when it is first imported): capture it for the call."""
    import io
    import logging

    buffer = io.StringIO()
    logger = logging.getLogger("Flight Recorder")
    saved = logger.handlers[:], logger.propagate
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            from torch.distributed.flight_recorder.fr_trace import main

            logger.handlers = [logging.StreamHandler(buffer)]
            logger.propagate = False
            main([str(folder)])
    finally:
        logger.handlers, logger.propagate = saved
    return buffer.getvalue()
