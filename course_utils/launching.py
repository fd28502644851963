"""Starting the ranks of a job on this machine: the one home of every way the course does it.

    launch("course_utils.jobs.ddp_train", nproc=2)      # torchrun, as a job's batch script would
    run_programs([Task(module, args, environ), ...], log)  # one forked process per rank
    start_program(Task(module, args, environ), log)     # one program, forked; the caller waits
    run_ranks(fn, world_size=2, timeout=3.0)             # a function, on forked gloo ranks

All three speak one vocabulary: a rank is a `Task` (a module, its arguments, the environment it
finds), rank 0 listens on a `free_port()` of 127.0.0.1, and what a launch returns says how it
ended with `processes.exit_description`. A Slurm submission (`batch.submit`) builds the same
tasks' variables from the job instead.

`launch` runs `python -m MODULE` under `torchrun --standalone` (or alone), through
`processes.run` (a session of its own, a time limit, the whole tree ended), in the environment of
a local launch (`ranks.local_launch_environ`: a kernel inside a Slurm job does not pass the job's
variables on). torchrun writes each rank's stdout and stderr to a log folder of its own and tees
them to the console with a `[default<rank>]:` prefix; the lines are shown and returned without
the prefix, and each rank's own text is kept for the error (`rank_logs.failure_cause`). Taught in
lesson 05; `distributed.launch` names it too, one of the course's published names there.

`run_programs` starts each rank from multiprocessing's fork server, which has imported torch once
(lesson 10's local route): on a 2-core laptop a rank started with `python -m` spends about 3 s
importing torch and 2.5 s more importing torch._dynamo (which the DistributedDataParallel
constructor imports) before its first step. Each forked rank gets exactly its task's environment,
its own process group over TCP, and runs the program as `python -m` runs it (runpy); what it
measures is the same, only its start is shorter. The server never touches a GPU (importing torch
does not initialise CUDA), so a rank initialises CUDA for itself. As with every start method of
multiprocessing but plain fork, a script (not a notebook) that calls it keeps its own top-level
code under the `__main__` guard, for a rank imports the caller's main module.

`run_ranks` forks the calling process itself, so its function may be defined in a notebook
(lesson 09 provokes failures with it).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import re
import runpy
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from course_utils import processes
from course_utils.rank_logs import failure_cause, own_cause, rank_outputs, strip_tee_prefix
from course_utils.ranks import local_launch_environ


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now: where rank 0 of a local job listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Task:
    """One rank: `python -m module *args` in exactly `environ` (nothing else is inherited)."""

    module: str
    args: tuple[str, ...]
    environ: Mapping[str, str]


# ---- torchrun ------------------------------------------------------------------------------
@dataclass(frozen=True)
class LaunchResult:
    returncode: int
    output: str  # every line the launch printed, in order, without torchrun's rank prefixes
    rank_output: dict[int, str] = field(default_factory=dict)  # rank -> its own stdout + stderr


def torchrun_command(module: str, args=(), nproc: int = 2, log_dir: str | None = None) -> list[str]:
    """The command line torchrun gets: one node, `nproc` processes, a free port (--standalone);
    with `log_dir`, each rank's output is written there too and tee'd to the console, prefixed."""
    if nproc < 1:
        raise ValueError(f"nproc={nproc} must be at least 1")
    logs = ["--log-dir", log_dir, "--redirects", "3", "--tee", "3"] if log_dir else []
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        *logs,
        "-m",
        module,
        *map(str, args),
    ]


def launch(
    module: str,
    *args,
    nproc: int = 2,
    env: dict | None = None,
    timeout: float = 300,
    check: bool = True,
    echo: bool = True,
    torchrun: bool = True,
) -> LaunchResult:
    """Run `python -m module args` under torchrun (or alone with torchrun=False) and stream its
    output line by line, so a notebook cell shows it live; returns the exit code and the text.

    env: variables added to the local launch's environment (e.g. {"OMP_NUM_THREADS": "1"}); they
    win over what the local launch set aside, so a lesson can set up a broken environment on
    purpose. check: raise RuntimeError (with the failing rank's own last lines) when it fails.
    """
    local = local_launch_environ()
    child_env = {**local.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    if echo and local.note:
        print(local.note, flush=True)

    def show(line: str) -> None:
        if echo:
            print(strip_tee_prefix(line), end="", flush=True)

    with tempfile.TemporaryDirectory(prefix="course-launch-") as logs:
        cmd = (
            torchrun_command(module, args, nproc, log_dir=logs)
            if torchrun
            else [sys.executable, "-m", module, *map(str, args)]
        )
        done = processes.run(cmd, timeout=timeout, env=child_env, merge=True, on_line=show)
        own = rank_outputs(logs) if torchrun else {}
    lines = [strip_tee_prefix(line) for line in done.stdout.splitlines(keepends=True)]
    if done.timed_out:
        lines.append(f"launch: killed after the timeout of {timeout:g} s\n")
    # killed at the limit: SIGKILL is what ended it
    code = -signal.SIGKILL if done.timed_out else done.returncode
    result = LaunchResult(code, "".join(lines), own)
    if check and result.returncode != 0:
        cause = failure_cause(result.output, own) if torchrun else None
        if cause is None and not torchrun:  # one process: all of the output is its own
            cause = own_cause("the program", code, result.output)
        tail = "".join(lines[-15:])
        how = f" ({processes.exit_description(code)})" if code < 0 else ""
        raise RuntimeError(
            f"{' '.join(cmd)} exited with code {code}{how}"
            + (f"\n{cause}" if cause else "")
            + f"\n--- last lines of its output ---\n{tail}"
        )
    return result


# ---- programs forked from a warm server (lesson 10) -------------------------------------------

# What every rank would import before its first step (a DDP program on the CPU or a GPU).
PRELOAD = ("torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo")


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


def _say(log: str, line: str) -> None:
    with open(log, "a") as f:
        f.write(f"local launch: {line}\n")


def start_program(
    task: Task, log: str | os.PathLike, preload: Sequence[str] = (), name: str | None = None
) -> multiprocessing.Process:
    """Fork one program from the warm server, its output appended to `log`; returns it started.
    The caller waits for it (`join`, `sentinel`), may signal it (`pid`), and ends what it left
    with `processes.kill_session`. The first start in this process waits for the server's
    imports (`PRELOAD` and `preload`)."""
    process = _context(preload).Process(
        target=_as_module, args=(task, str(log)), name=name or task.module
    )
    process.start()
    return process


def run_programs(
    tasks: Sequence[Task], log: str | os.PathLike, timeout: float = 300, preload: Sequence[str] = ()
) -> int:
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
    log = str(log)
    running, code = {}, 0
    try:
        for rank, task in enumerate(tasks):
            process = start_program(task, log, preload, name=f"rank{rank}")
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
                    _say(
                        log,
                        f"rank {rank} ended with {processes.exit_description(code)}"
                        + ("; stopped the others" if running else ""),
                    )
    finally:
        for _, process in running.values():
            processes.kill_session(process)  # the rank and what it started
            process.join()
    return code


# ---- a function on forked gloo ranks (lesson 09) ---------------------------------------------


class RanksFailed(RuntimeError):
    """Some ranks raised, or did not finish in time; the message names each and why."""


def run_ranks(fn, world_size: int = 2, timeout: float = 3.0, env: dict | None = None) -> list:
    """Return [fn(rank, world_size) for each rank], each called in a process of its own that
    joined a gloo group of `world_size`; then every rank meets at a barrier, as the next step
    of a training loop would.

    The processes are forked, so `fn` may be defined in a notebook. Forking is safe here because
    the ranks use gloo on the CPU and this process has not touched CUDA; once it has, a forked
    child cannot use CUDA again (the CUDA notes: use the spawn start method), so run_ranks refuses
    then, with the way out. `timeout` bounds the join
    and every collective; a process still alive `timeout` + 5 s after its start is killed, so
    none is left behind. env: variables set in each rank before it joins, such as
    TORCH_DISTRIBUTED_DEBUG=DETAIL or the flight recorder's (a rank that fails dumps its
    record). Raises RanksFailed naming each rank that raised or hung, and NotImplementedError
    when `fn` is an exercise's stub.
    """
    import torch

    if world_size < 1 or timeout <= 0:
        raise ValueError(f"world_size={world_size} must be >= 1 and timeout={timeout} > 0")
    if torch.cuda.is_initialized():
        raise RuntimeError(
            "run_ranks forks, and this process has already initialized CUDA: a forked child "
            "cannot use CUDA again (PyTorch's CUDA notes). Run the ranks as programs instead "
            "(distributed.launch, which starts fresh processes), or use the spawn start method "
            "with a function importable from a module"
        )
    ctx = multiprocessing.get_context("fork")
    port = free_port()
    pipes = [ctx.Pipe(duplex=False) for _ in range(world_size)]
    procs = [
        ctx.Process(target=_rank_main, args=(fn, rank, world_size, port, timeout, env or {}, w))
        for rank, (_, w) in enumerate(pipes)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout + 5
    outcomes = {}
    for rank, (p, (r, _)) in enumerate(zip(procs, pipes)):
        if r.poll(max(0.0, deadline - time.monotonic())):
            outcomes[rank] = r.recv()
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    return _results(outcomes, world_size, timeout)


def _rank_main(fn, rank, world_size, port, timeout, env, conn) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    devnull = os.open(os.devnull, os.O_WRONLY)  # the notebook shows no rank's stray output
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    # a kernel inside a Slurm job: the ranks form a group of their own, not the job's
    local = local_launch_environ().environ
    os.environ.clear()
    os.environ.update({**local, "TORCH_DISTRIBUTED_DEBUG": "OFF", **env})
    dist.set_debug_level_from_env()  # read at import; this rank may differ from its parent
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout),
        )
        result = fn(rank, world_size)
        dist.barrier()
        conn.send(("ok", result))
    except BaseException as e:  # reported to the parent, which raises
        from course_utils.failing import flight_recorder  # the record of a rank that failed

        flight_recorder.dump_flight_record(rank)
        conn.send(("error", type(e).__name__, str(e)))
    finally:
        conn.close()
        os._exit(0)  # a forked child must not run its parent's exit handlers


def _short(message: str) -> str:
    """A collective's fingerprint (TORCH_DISTRIBUTED_DEBUG=DETAIL) without its long device part."""
    return re.sub(r", TensorDeviceTypes=TensorOptions\(.*?\(nullopt\)\)", "", message)


def _results(outcomes: dict, world_size: int, timeout: float) -> list:
    problems = []
    for rank in range(world_size):
        outcome = outcomes.get(rank)
        if outcome is None:
            problems.append(f"rank {rank}: did not finish within {timeout:g} s and was killed")
        elif outcome[0] == "error":
            if outcome[1] == "NotImplementedError":
                raise NotImplementedError(outcome[2])
            message = outcome[2].strip().splitlines()[0] if outcome[2].strip() else ""
            problems.append(f"rank {rank}: {outcome[1]}: {_short(message)[:600]}")
    if problems:
        raise RanksFailed("; ".join(problems))
    return [outcomes[rank][1] for rank in range(world_size)]
