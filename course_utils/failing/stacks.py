"""Where every rank of a job is stuck: their Python stacks, taken with py-spy (lesson 09).

`py_spy_dump(pid)` is `py-spy dump --pid PID`: the stack of every thread of a running Python
process, which it pauses for an instant. A hung rank shows the same stack dump after dump;
`stacks_of_stuck_ranks` waits for that. On a cluster, slurm/stacks.sh runs
`course_utils.jobs.stacks` on each node of a job (srun --overlap), which uses the same functions.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import time
from pathlib import Path

import psutil

from course_utils import processes

ANSI_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")


def py_spy() -> str | None:
    """The py-spy program (beside this Python first: a venv's bin/ need not be on PATH)."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def py_spy_dump(pid: int, timeout: float = 20.0) -> str:
    """`py-spy dump --pid PID`: the Python stack of every thread of a running process.

    It pauses the process for an instant (ptrace). It needs permission to trace: the same user
    and a kernel that allows it (kernel.yama.ptrace_scope 0), or root / CAP_SYS_PTRACE."""

    exe = py_spy()
    if exe is None:
        raise RuntimeError(
            "py-spy is not installed: pip install py-spy (it is in requirements.txt)"
        )
    done = processes.run(
        [exe, "dump", "--pid", str(pid)], timeout=timeout, env={**os.environ, "NO_COLOR": "1"}
    )
    if not done.ok:
        raise RuntimeError(
            f"py-spy dump --pid {pid} failed ({done.describe()}): "
            f"{(done.stderr or done.stdout).strip()}"
        )
    return ANSI_ESCAPES.sub("", done.stdout)  # some terminals' settings force colours anyway


def frames(dump: str) -> list[str]:
    """The function names of the main thread in a py-spy dump, innermost first."""
    names, in_main = [], False
    for line in dump.splitlines():
        if line.startswith("Thread "):
            in_main = '"MainThread"' in line
        elif in_main and line.startswith("    "):
            names.append(line.strip().split(" (")[0])
    return names


def rank_of(process: psutil.Process) -> int | None:
    """The rank a launcher gave a process: RANK (torchrun), else SLURM_PROCID (srun)."""
    try:
        environ = process.environ()
    except psutil.Error:
        return None
    value = environ.get("RANK", environ.get("SLURM_PROCID"))
    return int(value) if value is not None and value.isdigit() else None


def _ranks_running(marker: str) -> dict[int, psutil.Process]:
    """Our descendants whose command line holds `marker` and that have a rank."""
    found = {}
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            cmdline = p.cmdline()
            if marker in cmdline and "torch.distributed.run" not in cmdline:
                rank = rank_of(p)
                if rank is not None:
                    found[rank] = p
    return found


def stacks_of_stuck_ranks(
    marker: str, nproc: int, limit: float, interval: float = 0.3, stop=None
) -> dict[int, str]:
    """py-spy every rank of a launch (found by `marker` in their command lines) until three
    dumps in a row show the same main-thread stack for every rank, outside an import (loading
    torch's libraries can take a second): they are stuck there.

    Returns {rank: dump}, or {} when that did not happen within `limit` seconds, when `stop`
    (a threading.Event) is set, when py-spy is not installed, or when it failed 10 times in a
    row on running ranks (no permission to trace them)."""
    if py_spy() is None:
        return {}
    deadline, previous, same, failed = time.monotonic() + limit, None, 0, 0
    while time.monotonic() < deadline and not (stop and stop.is_set()):
        ranks = _ranks_running(marker)
        if len(ranks) == nproc:
            try:
                dumps = {rank: py_spy_dump(p.pid) for rank, p in sorted(ranks.items())}
                failed = 0
            except RuntimeError:  # a rank ended while we looked, or py-spy may not trace it
                dumps, failed = None, failed + 1
                if failed >= 10:
                    return {}
            now = {rank: frames(d) for rank, d in dumps.items()} if dumps else None
            importing = now is None or any("_find_and_load" in f for f in now.values())
            same = same + 1 if not importing and now == previous else 0
            previous = now
            if same >= 2:
                return dumps
        time.sleep(interval)
    return {}
