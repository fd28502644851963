"""The ranks of a job on this machine, each a process of its own, forked from a Python that has
imported torch once: lesson 10's local route, where there is no Slurm to start them.

    code = local_ranks.run(tasks, log, timeout=300)   # one Task per rank; 0 when all exit 0

Why not one `python -m` per rank, as srun or torchrun start them: on a 2-core laptop each such
process spends about 3 s importing torch and 2.5 s more importing torch._dynamo (which the
DistributedDataParallel constructor imports), before its first step; lesson 10 starts 15
ranks. Here multiprocessing's fork server (a clean process the standard library starts once,
in which nothing but imports runs) imports `PRELOAD`, and each rank is forked from it:
a new process with its own environment, its own process group over TCP, and the program run as
`python -m` runs it (runpy). What a rank measures is the same; only its start is shorter.

The fork server never touches a GPU (importing torch does not initialise CUDA), so a forked
rank initialises CUDA for itself, as a freshly started process does. As with every start method
of multiprocessing but plain fork, a script (not a notebook) that calls `run` keeps its own
top-level code under the `__main__` guard, for a rank imports the caller's main module.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import runpy
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from course_utils import processes

# What every rank would import before its first step (a DDP program on the CPU or a GPU).
PRELOAD = ("torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo")


@dataclass(frozen=True)
class Task:
    """One rank: `python -m module *args` in exactly `environ` (nothing else is inherited)."""

    module: str
    args: tuple[str, ...]
    environ: Mapping[str, str]


def _context(preload: Sequence[str]):
    context = multiprocessing.get_context("forkserver")
    # Read when the server starts (the first run in this process); a later list is ignored.
    context.set_forkserver_preload([*PRELOAD, *preload])
    return context


def _as_module(task: Task, log: str) -> None:
    """The forked rank: a session of its own (what it starts ends with it), its output to
    `log`, its own environment, then the program."""
    os.setsid()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):  # a line at a time, as PYTHONUNBUFFERED would
        stream.reconfigure(line_buffering=True)
    os.environ.clear()
    os.environ.update(task.environ)
    sys.argv = [task.module, *task.args]
    # Preloaded for its imports; runpy runs the module's own code afresh, as `python -m` does
    # (and warns when it finds the module imported already).
    sys.modules.pop(task.module, None)
    runpy.run_module(task.module, run_name="__main__", alter_sys=True)


def _say(log: Path, line: str) -> None:
    with open(log, "a") as f:
        f.write(f"local launch: {line}\n")


def run(tasks: Sequence[Task], log: str | os.PathLike, timeout: float = 300,
        preload: Sequence[str] = ()) -> int:  # fmt: skip
    """Start every task at once (the ranks of one job must all be there to meet), each writing
    its output to `log`; wait at most `timeout` seconds. Returns 0 when every rank exited 0,
    else the first failure's code (negative: a signal; -9 when the timeout ended them).

    When one rank fails, the others are killed, as srun's --kill-on-bad-exit and torchrun do:
    they would wait for it in their next collective until their own timeout. `preload`: more
    modules for the fork server to import (the program itself)."""
    if not tasks:
        raise ValueError("tasks is empty: a job has at least one rank")
    if timeout <= 0:
        raise ValueError(f"timeout={timeout} must be positive (seconds)")
    log = Path(log)
    context = _context(preload)
    running, code = {}, 0
    try:
        for rank, task in enumerate(tasks):
            process = context.Process(target=_as_module, args=(task, str(log)), name=f"rank{rank}")
            process.start()  # the first start in this process waits for the server's imports
            running[process.sentinel] = (rank, process)
        deadline = time.monotonic() + timeout
        while running and code == 0:
            left = max(0.0, deadline - time.monotonic())
            ready = multiprocessing.connection.wait(list(running), left)
            if not ready:
                code = -signal.SIGKILL
                _say(log, f"killed the ranks after the timeout of {timeout:g} s")
            for sentinel in ready:
                rank, process = running.pop(sentinel)
                process.join()
                processes.kill_session(process)  # what the rank left running
                if process.exitcode != 0 and code == 0:
                    code = process.exitcode
                    _say(log, f"rank {rank} ended with {processes.exit_description(code)}"
                              + ("; stopped the others" if running else ""))  # fmt: skip
    finally:
        for _, process in running.values():
            processes.kill_session(process)  # the rank and what it started
            process.join()
    return code
