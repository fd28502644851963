"""Who am I in a distributed job: ranks from torchrun or Slurm, process groups, and launching.

Read the environment in one place (`DistEnv.from_environ`), with a fallback chain: torchrun's
variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), else Slurm's
(SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, SLURM_STEP_TASKS_PER_NODE, SLURM_JOB_NODELIST,
SLURM_JOB_ID), else a single process. `init_process_group` joins the group with the device of
`device.local_device` and the backend of `choose_backend`, and records what it chose: `state()`,
`is_main_process()` and `collective_device()` read that record. Taught in lesson 05.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from course_utils.device import gpu_count, local_device
from course_utils.environment import env_int
from course_utils.processes import kill_session

TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
SLURM_VARS = ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS")
DEFAULT_PORT = 29500
# Ports derived from a job id fall in 20000-29999: unprivileged, below Linux's ephemeral range
# (32768-60999), so they do not collide with ports the kernel hands out to clients.
JOB_PORT_BASE, JOB_PORT_SPAN = 20000, 10000


@dataclass(frozen=True)
class DistEnv:
    """This process's place in a job: global rank, rank on its node, number of processes, and
    the address rank 0 listens on. `source` says where the values came from."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    master_addr: str = "127.0.0.1"
    master_port: int = DEFAULT_PORT
    source: str = "none"  # "torchrun", "slurm" or "none"
    local_world_size: int = 1  # processes of this job on this node

    @classmethod
    def from_environ(cls, environ=None) -> DistEnv:
        """Read torchrun's variables, else Slurm's (in a task srun started), else rank 0 of 1.

        Raises ValueError when the values are inconsistent, naming the variables."""
        environ = os.environ if environ is None else environ
        if any(name in environ for name in TORCHRUN_VARS):
            return _from_torchrun(environ)
        if "SLURM_PROCID" in environ and not _in_batch_script(environ):
            return _from_slurm(environ)
        port = env_int("MASTER_PORT", environ, DEFAULT_PORT)
        return cls(master_addr=environ.get("MASTER_ADDR", "127.0.0.1"), master_port=port)


def _in_batch_script(environ) -> bool:
    """The batch script itself (a job, no step): Slurm sets SLURM_PROCID=0 and SLURM_NTASKS=N
    there too, but the script is not one of the N tasks; srun starts those (with SLURM_STEP_ID)."""
    return "SLURM_JOB_ID" in environ and "SLURM_STEP_ID" not in environ


def _validate(rank: int, local_rank: int, world_size: int, names: tuple[str, str, str]) -> None:
    rank_name, local_name, size_name = names
    if world_size < 1:
        raise ValueError(f"{size_name}={world_size} must be at least 1")
    if not 0 <= rank < world_size:
        raise ValueError(
            f"{rank_name}={rank} is outside 0..{size_name}-1 (={world_size - 1}); "
            "the launcher's variables disagree: unset stale ones or relaunch"
        )
    if not 0 <= local_rank <= rank:
        raise ValueError(
            f"{local_name}={local_rank} must be between 0 and {rank_name}={rank} "
            "(a rank on a node is never larger than the global rank)"
        )


def _from_torchrun(environ) -> DistEnv:
    missing = [name for name in TORCHRUN_VARS if name not in environ]
    if missing:
        raise ValueError(
            f"{', '.join(missing)} not set while {', '.join(set(TORCHRUN_VARS) - set(missing))} "
            "is: torchrun sets RANK, LOCAL_RANK and WORLD_SIZE together; unset the stray one"
        )
    rank, local, size = (env_int(name, environ) for name in TORCHRUN_VARS)
    _validate(rank, local, size, TORCHRUN_VARS)
    local_size = env_int("LOCAL_WORLD_SIZE", environ, local + 1)
    _validate_local(local, local_size, "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    return DistEnv(
        rank, local, size,
        environ.get("MASTER_ADDR", "127.0.0.1"), env_int("MASTER_PORT", environ, DEFAULT_PORT),
        "torchrun", local_size,
    )  # fmt: skip


def _validate_local(local_rank: int, local_size: int, rank_name: str, size_name: str) -> None:
    if not 0 <= local_rank < local_size:
        raise ValueError(
            f"{rank_name}={local_rank} is outside 0..{size_name}-1 (={local_size - 1}); "
            "the launcher's variables disagree: unset stale ones or relaunch"
        )


def tasks_on_node(spec: str, node_index: int) -> int:
    """Tasks on node `node_index` from Slurm's compressed count: "2(x3),1" -> 2, 2, 2, 1."""
    counts = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            raise ValueError(
                f"tasks per node {spec!r}: {part!r} is not a count like 2 or 2(x3); "
                "is SLURM_STEP_TASKS_PER_NODE from this Slurm?"
            )
        counts += [int(m[1])] * int(m[2] or 1)
    if not 0 <= node_index < len(counts):
        raise ValueError(
            f"SLURM_NODEID={node_index} is outside the {len(counts)} node(s) of {spec!r}"
        )
    return counts[node_index]


def _from_slurm(environ) -> DistEnv:
    rank = env_int("SLURM_PROCID", environ)
    local = env_int("SLURM_LOCALID", environ, 0)
    size = env_int("SLURM_NTASKS", environ, 1)
    _validate(rank, local, size, SLURM_VARS)
    per_node = environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE")
    if per_node:
        local_size = tasks_on_node(per_node, env_int("SLURM_NODEID", environ, 0))
    else:
        local_size = env_int("SLURM_NTASKS_PER_NODE", environ, local + 1)
    _validate_local(local, local_size, "SLURM_LOCALID", "tasks on this node")
    addr = environ.get("MASTER_ADDR") or _first_host(
        environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST") or "127.0.0.1"
    )
    if environ.get("MASTER_PORT"):
        port = env_int("MASTER_PORT", environ)
    elif environ.get("SLURM_JOB_ID"):
        port = port_for_job(env_int("SLURM_JOB_ID", environ))
    else:
        port = DEFAULT_PORT
    return DistEnv(rank, local, size, addr, port, "slurm", local_size)


def port_for_job(job_id: int) -> int:
    """A port for rank 0 derived from the Slurm job id, so two jobs on one node do not collide."""
    if job_id < 0:
        raise ValueError(f"job id {job_id} must be non-negative")
    return JOB_PORT_BASE + job_id % JOB_PORT_SPAN


def _first_host(nodelist: str) -> str:
    """First host of a Slurm node list: `scontrol show hostnames` when present, else ours."""
    scontrol = shutil.which("scontrol")
    if scontrol:
        try:
            out = subprocess.run(
                [scontrol, "show", "hostnames", nodelist],
                capture_output=True, text=True, timeout=10, check=True,
            )  # fmt: skip
            hosts = out.stdout.split()
            if hosts:
                return hosts[0]
        except (subprocess.SubprocessError, OSError):
            pass  # fall back to our parser, which covers the common syntax
    return expand_hostlist(nodelist)[0]


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets: "a[1,2],b" -> ["a[1,2]", "b"]."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if depth < 0 or depth > 1:
            raise ValueError(f"host list {text!r} has unbalanced or nested brackets")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError(f"host list {text!r} has an unclosed '['")
    parts.append(text[start:])
    return [p for p in parts if p]


def _expand_range(spec: str, hostlist: str) -> list[str]:
    values = []
    for item in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", item.strip())
        if not m:
            raise ValueError(
                f"host list {hostlist!r}: {item!r} is not a number or a range like 1-3"
            )
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise ValueError(f"host list {hostlist!r}: range {item!r} runs backwards")
        width = len(lo)  # "01-03" keeps its zero padding
        values += [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]
    return values


def _expand_one(pattern: str, hostlist: str) -> list[str]:
    m = re.search(r"\[([^\]]*)\]", pattern)
    if not m:
        return [pattern]
    head, tail = pattern[: m.start()], pattern[m.end() :]
    rests = _expand_one(tail, hostlist)  # later bracket groups vary fastest, as in Slurm
    return [head + value + rest for value in _expand_range(m.group(1), hostlist) for rest in rests]


def expand_hostlist(hostlist: str) -> list[str]:
    """Expand Slurm's compressed host list: "cn[1-3,7]" -> ["cn1", "cn2", "cn3", "cn7"].

    Handles several comma-separated parts ("a[01-03],b5"), zero padding, and several bracket
    groups in one name ("r[1-2]n[1-2]" -> r1n1, r1n2, r2n1, r2n2).
    """
    hostlist = hostlist.strip()
    if not hostlist:
        raise ValueError("host list is empty; expected something like 'cn[1-3,7]'")
    return [host for part in _split_top_level(hostlist) for host in _expand_one(part, hostlist)]


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


def batch_script_warning(environ=None) -> str | None:
    """The warning for Python started by a multi-task batch script itself, not by srun.

    That process is not one of the job's tasks: it trains alone while the rest of the
    allocation stays idle. None when all is well.
    """
    environ = os.environ if environ is None else environ
    if any(name in environ for name in TORCHRUN_VARS) or not _in_batch_script(environ):
        return None
    tasks = environ.get("SLURM_NTASKS", "1")
    if not tasks.isdigit() or int(tasks) <= 1:
        return None
    return (
        f"warning: this job has SLURM_NTASKS={tasks} tasks, but this Python was started by the "
        "batch script itself, not by srun: it runs as 1 process of 1. Start it with "
        "`srun python ...` (or torchrun under srun) to use every task"
    )


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


def _error_lines(lines: list[str]) -> list[list[str]]:
    """The exception text of each Python traceback in `lines` (what follows its frames)."""
    found, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("Traceback (most recent call last)"):
            i += 1
            continue
        i += 1
        while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
            i += 1  # frames: '  File ...', their source lines and ^^^ markers
        message = []
        while i < len(lines) and not lines[i].startswith("Traceback"):
            if re.match(r"^(\[?[EWI]\d{4} |\*{5}|\[rank\d+\]:)", lines[i]):
                break  # torchrun's own log lines and PyTorch's C++ warnings end the message
            message.append(lines[i].rstrip())
            i += 1
        found.append([m for m in message if m])
    return found


def failure_cause(output: str) -> str | None:
    """The failing rank's own error lines from a launch's output, e.g. "Duplicate GPU detected".

    torchrun's summary names the root-cause rank and its exit code but not its error; PyTorch
    prefixes a rank's uncaught traceback with "[rankN]:" once its process group exists, so the
    lines of that rank are picked out. Before that (or without torchrun) the last traceback that
    is not torchrun's own is used. None when the output holds no traceback.
    """
    lines = output.splitlines()
    root = _ROOT_CAUSE.search(output)
    rank_of_root = int(root[1]) if root else None
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
        if root and int(root[2]) < 0:
            return f"cause: {who} was killed by signal {-int(root[2])} (no Python traceback)"
        return None
    shown = messages[-1][:8]
    return f"cause ({who}): " + "\n  ".join(shown)
