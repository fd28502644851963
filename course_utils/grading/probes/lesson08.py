"""Lesson 08's probes: what its checks hand the learner's code, in the learner's process.

08.1: a loader (`LoggedLoader`) that logs each batch it hands out and when, given to the
learner's `time_loader`. 08.3: the two training jobs the check hands `name_the_bottleneck` (a
loader that counts its reads, one compute-bound, one loader-bound), run here, returning the
traces their function wrote. The judge reads each trace itself (checks/lesson08.py).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from course_utils import answer_jobs, profiling
from course_utils.grading import probe
from course_utils.jobs.bottleneck_job import PROFILE_JOBS, one_thread, profile_job


def _events(trace_path: Path) -> list | None:
    """The trace's complete events, only the fields the judge reads, or None: no trace."""
    if not trace_path.is_file():
        return None
    try:
        events = profiling.read_trace(trace_path)
    except (ValueError, KeyError):
        return []
    keep = ("name", "cat", "ts", "dur")
    return [{k: e[k] for k in keep if k in e} for e in events]


@probe("08.3")
def run_name_the_bottleneck(name_the_bottleneck):
    """In the learner's process: each job through their function, and the trace it wrote."""
    found = {}
    with tempfile.TemporaryDirectory() as tmp, one_thread():
        for kind in PROFILE_JOBS:
            images, model, loader, optimizer = profile_job(kind)
            trace = Path(tmp) / f"{kind}-bound.json"
            start = time.perf_counter()
            answer = name_the_bottleneck(model, loader, optimizer, trace)
            seconds = time.perf_counter() - start
            found[kind] = {
                "answer": answer,
                "events": _events(trace),
                "reads": images.reads,
                "seconds": seconds,
            }
    return found


@probe("08.3/digest")
def name_the_bottleneck_digest(name_the_bottleneck) -> str | None:
    """The digest of the learner's function as their cell defines it now (its job's command
    line carries the digest of the version it ran); None where Python cannot read its source."""
    return answer_jobs.digest_if_readable(name_the_bottleneck)


# ---- 08.1 ---------------------------------------------------------------------------------


class LoggedLoader:
    """Batches of known sizes, each taking `delay` seconds to produce (a slow disk); logs when
    each pass began and when each batch was handed out, with its size."""

    def __init__(self, sizes, delay: float):
        self.sizes, self.delay = list(sizes), float(delay)
        self.passes: list[float] = []  # perf_counter() at each iter()
        self.handed: list[tuple[int, float]] = []  # (images, perf_counter()) per batch

    def __iter__(self):
        self.passes.append(time.perf_counter())
        for size in self.sizes:
            time.sleep(self.delay)
            self.handed.append((size, time.perf_counter()))
            yield torch.zeros(size, 3, 4, 4), torch.zeros(size, dtype=torch.long)

    def __len__(self):
        return len(self.sizes)


@probe("08.1")
def run_time_loader(time_loader, sizes: list, delay: float, batches: int):
    loader = LoggedLoader(sizes, delay)
    rate = time_loader(loader, batches)
    return {"rate": rate, "passes": loader.passes, "handed": loader.handed}
