"""Distributed training: process groups, rank 0, printing from ranks, and launching.

Who this process is comes from `course_utils.ranks` (`DistEnv.from_environ`: torchrun's
variables, else Slurm's, else rank 0 of 1; re-exported here). `init_process_group` joins the
group with the device of `device.local_device` and the backend of `choose_backend`, and records
what it chose: `state()`, `is_main_process()` and `collective_device()` read that record.
Taught in lesson 05.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from course_utils.device import gpu_count, local_device
from course_utils.processes import kill_session
from course_utils.ranks import (  # noqa: F401  (re-exported: lessons and programs use them here)
    TORCHRUN_VARS,
    DistEnv,
    batch_script_warning,
    expand_hostlist,
    port_for_job,
    tasks_on_node,
)


def choose_backend(local_world_size: int, gpu_count: int) -> str:
    """The backend: "nccl" only when every local rank has a GPU of its own, else "gloo".

    NCCL refuses two ranks on one GPU ("Duplicate GPU detected"); gloo all-reduces CPU tensors
    and CUDA tensors alike, which is how the cluster documentation runs several DDP replicas on
    one GPU ("NCCL does not work on a single GPU"). Pass gpu_count=0 for a job on the CPU.
    """
    if local_world_size < 1 or gpu_count < 0:
        raise ValueError(
            f"local_world_size={local_world_size} must be >= 1 and gpu_count={gpu_count} >= 0"
        )
    return "nccl" if gpu_count >= local_world_size else "gloo"


@dataclass(frozen=True)
class GroupState:
    """What `init_process_group` decided, recorded once for the rest of the process."""

    env: DistEnv
    backend: str
    device: torch.device


_STATE: GroupState | None = None


def is_initialized() -> bool:
    """True inside a process group (torch.distributed built and initialized)."""
    return dist.is_available() and dist.is_initialized()


def state() -> GroupState | None:
    """The decisions of `init_process_group` in this process, or None before (or without) it."""
    return _STATE if is_initialized() else None


def rank() -> int:
    """This process's global rank: the group's when there is one, else the launcher's."""
    if is_initialized():
        return dist.get_rank()
    return DistEnv.from_environ().rank


def is_main_process() -> bool:
    """True on rank 0, and in a process that is not part of a distributed job: the one rank
    that logs, saves checkpoints and requeues the job."""
    return rank() == 0


def collective_device() -> torch.device:
    """Where tensors for collectives must live: this rank's GPU under nccl, else the CPU."""
    current = state()
    if current is not None and current.backend == "nccl":
        return current.device
    if is_initialized() and dist.get_backend() == "nccl":  # a group joined without us
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join_error(env: DistEnv, port: int, backend: str, timeout: float, error: Exception) -> str:
    """Why the group did not form, naming the real cause when it is not a missing rank."""
    text = f"{type(error).__name__}: {error}"
    where = f"{env.master_addr}:{port}"
    if "EADDRINUSE" in text or "address already in use" in text.lower():
        return (
            f"rank {env.rank}: port {where} is already in use by another process (EADDRINUSE), "
            "so rank 0 could not listen there. Another job or a leftover process holds it: "
            "choose another MASTER_PORT (or let the job id choose it), or end the old process. "
            f"Cause: {text}"
        )
    return (
        f"rank {env.rank}: not all {env.world_size} processes joined within {timeout:g} s at "
        f"{where} (backend {backend}, variables from {env.source}). Check that the launcher "
        "started world_size processes (torchrun --nproc-per-node, srun --ntasks) and that rank "
        f"0's host is reachable. Cause: {text}"
    )


def init_process_group(
    backend: str | None = None,
    env: DistEnv | None = None,
    timeout: float = 60.0,
    device: torch.device | None = None,
) -> DistEnv:
    """Join the job's process group and return this process's DistEnv.

    device: default `device.local_device(local rank, local world size)`; a GPU becomes the
    current CUDA device. backend: default `choose_backend(local world size, GPUs)`, so ranks that
    share a GPU use gloo. timeout: seconds to wait for all ranks; a rank that never comes, or a
    port in use, gives a RuntimeError that says which instead of a hang.
    """
    global _STATE
    env = env or DistEnv.from_environ()
    warning = batch_script_warning()
    if warning:
        print_line(warning)
    device = device or local_device(env.local_rank, env.local_world_size)
    gpus = gpu_count() if device.type == "cuda" else 0
    backend = backend or choose_backend(env.local_world_size, gpus)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    port = env.master_port
    if env.source == "none" and "MASTER_PORT" not in os.environ:
        port = _free_port()  # a lone process: any free port, so two notebooks do not collide
    # env:// works under torchrun (which serves the store itself) and under srun (we fill it in).
    os.environ.update(
        MASTER_ADDR=env.master_addr, MASTER_PORT=str(port),
        RANK=str(env.rank), WORLD_SIZE=str(env.world_size), LOCAL_RANK=str(env.local_rank),
    )  # fmt: skip
    try:
        dist.init_process_group(
            backend, init_method="env://", rank=env.rank, world_size=env.world_size,
            timeout=timedelta(seconds=timeout),
        )  # fmt: skip
    except Exception as e:  # the store and backends raise several types (DistStoreError, ...)
        raise RuntimeError(join_error(env, port, backend, timeout, e)) from e
    _STATE = GroupState(env, backend, device)
    return env


def import_fully_shard():
    """FSDP2's `fully_shard` and the route taken: public since PyTorch 2.6, the composable API
    before; (None, why) where this PyTorch has neither."""
    try:
        from torch.distributed.fsdp import fully_shard

        return fully_shard, "torch.distributed.fsdp.fully_shard"
    except ImportError:
        pass
    try:
        from torch.distributed._composable.fsdp import fully_shard

        return fully_shard, "torch.distributed._composable.fsdp.fully_shard"
    except ImportError:
        return None, f"PyTorch {torch.__version__} has no fully_shard (FSDP2)"


def print_line(*args, sep: str = " ") -> None:
    """Print one whole line with a single write, flushed.

    Ranks on a node share one stdout. `print` writes the text and the newline separately, so with
    unbuffered output (PYTHONUNBUFFERED=1, as launchers and CI often set) two ranks' lines can
    interleave into "...from torchrunrank 1/4 ...". One write of a short line to a pipe is atomic.
    """
    sys.stdout.write(sep.join(str(a) for a in args) + "\n")
    sys.stdout.flush()


def print0(*args, sep: str = " ") -> None:
    """Print a line on rank 0 only (flushed, so launchers show lines as they come)."""
    if is_main_process():
        print_line(*args, sep=sep)


def print_rank(*args, sep: str = " ") -> None:
    """Print a line from every rank, prefixed with "[rank R]"."""
    print_line(f"[rank {rank()}]", *args, sep=sep)


def barrier() -> None:
    """Wait for all ranks (a no-op outside a process group)."""
    if is_initialized():
        dist.barrier()


def exit_now(code: int) -> None:
    """End the process without interpreter teardown, output flushed.

    On the course's two-node Slurm cluster, a torchrun job now and then (2 of some 20 runs of the
    Slurm tests) finished training, printed everything, and then hung in the first node's local
    rank 0 as it exited (gloo and store threads torn down at exit, waiting on torchrun's agent,
    which waits for the process); only the job's time limit ended it. Call it once the work is
    done and written: there is nothing left for teardown to do.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def cleanup(timeout: float | None = 60.0) -> None:
    """Destroy the process group at the end of a run: call it on every rank, after the work.

    `destroy_process_group` itself can hang now and then (pytorch/pytorch#75097; not seen here:
    the hang the course met came later, in teardown, see `exit_now`). A finished job that hangs
    sits on its nodes until the time limit, so after `timeout` seconds a watchdog says so and
    ends the process with exit code 0: the work is done. timeout=None waits for ever.
    """
    if not is_initialized():
        return
    finished = threading.Event()
    if timeout is not None:
        this_rank = dist.get_rank()

        def watchdog():
            if not finished.wait(timeout):
                print_line(
                    f"rank {this_rank}: destroy_process_group did not return within {timeout:g} s "
                    "(a known PyTorch hang at shutdown); the work is done, so exiting now"
                )
                exit_now(0)

        threading.Thread(target=watchdog, name="cleanup-watchdog", daemon=True).start()
    dist.destroy_process_group()
    finished.set()


@dataclass(frozen=True)
class LaunchResult:
    returncode: int
    output: str


def torchrun_command(module: str, args=(), nproc: int = 2) -> list[str]:
    """The command line torchrun gets: one node, `nproc` processes, a free port (--standalone)."""
    if nproc < 1:
        raise ValueError(f"nproc={nproc} must be at least 1")
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={nproc}", "-m", module, *map(str, args),
    ]  # fmt: skip


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

    env: variables added to this process's environment (e.g. {"OMP_NUM_THREADS": "1"}).
    check: raise RuntimeError (with the last lines) when the run fails.
    """
    cmd = (
        torchrun_command(module, args, nproc)
        if torchrun
        else [sys.executable, "-m", module, *map(str, args)]
    )
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    for name in (*TORCHRUN_VARS, "MASTER_ADDR", "MASTER_PORT"):
        child_env.pop(name, None)  # a notebook inside a job must not pass its own rank on
    lines = []
    # A session of its own: on a time-out or Ctrl-C the whole tree goes, torchrun's workers too.
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env,
        bufsize=1, start_new_session=True,
    ) as proc:  # fmt: skip
        timed_out = False

        def kill():  # a hung run must not block the notebook forever
            nonlocal timed_out
            timed_out = True
            kill_session(proc)

        watchdog = threading.Timer(timeout, kill)
        watchdog.start()
        try:
            for line in proc.stdout:
                lines.append(line)
                if echo:
                    print(line, end="", flush=True)
            proc.wait()
        except BaseException:  # Ctrl-C in the notebook: do not leave workers behind
            kill_session(proc)
            raise
        finally:
            watchdog.cancel()
            kill_session(proc)  # workers a failed launcher left behind
    if timed_out:
        lines.append(f"launch: killed after the timeout of {timeout:g} s\n")
    result = LaunchResult(proc.returncode, "".join(lines))
    if check and result.returncode != 0:
        cause = failure_cause(result.output)
        tail = "".join(lines[-15:])
        raise RuntimeError(
            f"{' '.join(cmd)} exited with code {result.returncode}"
            + (f"\n{cause}" if cause else "")
            + f"\n--- last lines of its output ---\n{tail}"
        )
    return result


_RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?")
_ROOT_CAUSE = re.compile(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.DOTALL)
_LAUNCHER_FRAMES = ("torch/distributed/run.py", "torch/distributed/launcher", "ChildFailedError")
_TRACEBACK = ["Traceback (most recent call last):"]
# The first line of an exception's text: "pkg.SomeError: text", "Name: text" or a bare
# "KeyboardInterrupt"; never indented, never a source line such as "x = f(y)".
_EXCEPTION_HEADER = re.compile(r"^[A-Za-z_][\w.]*(: |:$|(Error|Exception|Interrupt|Exit)$)")


def _error_lines(lines: list[str]) -> list[list[str]]:
    """The exception text of each Python traceback in `lines` (what follows its frames)."""
    found, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("Traceback (most recent call last)"):
            i += 1
            continue
        i += 1
        while (
            i < len(lines)
            and not lines[i].startswith("Traceback")
            and not (_EXCEPTION_HEADER.match(lines[i]))
        ):
            # frames: '  File ...', their source lines and ^^^ markers, and the pieces of them
            # another rank's unbuffered write tore off onto a line of their own
            i += 1
        message = []
        while i < len(lines) and not lines[i].startswith("Traceback"):
            if re.match(r"^(\[?[EWI]\d{4} |\*{5}|\[rank\d+\]:)", lines[i]):
                break  # torchrun's own log lines and PyTorch's C++ warnings end the message
            if message and lines[i].startswith(" "):
                break  # another rank's frames, printed into the middle of this traceback
            message.append(lines[i].rstrip())
            i += 1
        found.append([m for m in message if m])
    return found


def root_cause(output: str) -> tuple[int, int] | None:
    """(rank, exit code) of the rank torchrun's summary calls the root cause: the first to exit
    with an error (in a hang, a rank that waited rather than the one that stalled)."""
    m = _ROOT_CAUSE.search(output)
    return (int(m[1]), int(m[2])) if m else None


def failure_cause(output: str) -> str | None:
    """The failing rank's own error lines from a launch's output, e.g. "Duplicate GPU detected".

    torchrun's summary names the root-cause rank and its exit code but not its error; PyTorch
    prefixes a rank's uncaught traceback with "[rankN]:" once its process group exists, so the
    lines of that rank are picked out. Before that (or without torchrun) the last traceback that
    is not torchrun's own is used. None when the output holds no traceback.
    """
    lines = output.splitlines()
    root = root_cause(output)
    rank_of_root = root[0] if root else None
    by_rank: dict[int, list[str]] = {}
    plain = []
    for line in lines:
        m = _RANK_PREFIX.match(line)
        if m:
            by_rank.setdefault(int(m[1]), []).append(line[m.end() :])
        else:
            plain.append(line)
    if rank_of_root is not None and by_rank.get(rank_of_root):
        messages = _error_lines(by_rank[rank_of_root])
        who = f"rank {rank_of_root}"
    else:
        tracebacks = "\n".join(plain).split("Traceback (most recent call last)")[1:]
        mine = [t for t in tracebacks if not any(m in t for m in _LAUNCHER_FRAMES)]
        messages = [msg for t in mine for msg in _error_lines(_TRACEBACK + t.splitlines()[1:])]
        who = f"rank {rank_of_root}" if rank_of_root is not None else "the program"
    messages = [m for m in messages if m]
    if not messages:
        if root and root[1] < 0:
            return f"cause: {who} was killed by signal {-root[1]} (no Python traceback)"
        return None
    shown = messages[-1][:8]
    return f"cause ({who}): " + "\n  ".join(shown)
