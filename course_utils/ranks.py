"""Who am I in a job: ranks from torchrun or Slurm, read in one place, without importing torch.

`DistEnv.from_environ` reads torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), else Slurm's (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS,
SLURM_STEP_TASKS_PER_NODE, SLURM_JOB_NODELIST, SLURM_JOB_ID), else says "rank 0 of 1". Light on
purpose: `course_utils.jobs.your_program` runs it in every task before a learner's program starts.
`course_utils.distributed` builds the process group on it (and re-exports these names).
Taught in lesson 05.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from course_utils import processes
from course_utils.environment import env_int

TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
SLURM_VARS = ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS")
DEFAULT_PORT = 29500
# Ports derived from a job id fall in 20000-29999: unprivileged, below Linux's ephemeral range
# (32768-60999), so they do not collide with ports the kernel hands out to clients.
JOB_PORT_BASE, JOB_PORT_SPAN = 20000, 10000
NODE_VARIABLE = "COURSE_NODE"  # the emulated node of a local rank (several nodes on one machine)


def node_name(environ: Mapping[str, str] | None = None) -> str:
    """This process's node: the local emulation's (NODE_VARIABLE), else Slurm's
    (SLURMD_NODENAME), else the host's name."""
    environ = os.environ if environ is None else environ
    return environ.get(NODE_VARIABLE) or environ.get("SLURMD_NODENAME") or socket.gethostname()


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
        rank,
        local,
        size,
        environ.get("MASTER_ADDR", "127.0.0.1"),
        env_int("MASTER_PORT", environ, DEFAULT_PORT),
        "torchrun",
        local_size,
    )


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
    addr, port = job_master(environ)
    return DistEnv(rank, local, size, addr, port, "slurm", local_size)


def job_master(environ=None) -> tuple[str, int]:
    """Where rank 0 of a Slurm job listens: MASTER_ADDR/MASTER_PORT when set, else the job's
    first node and a port derived from the job id (`port_for_job`)."""
    environ = os.environ if environ is None else environ
    addr = environ.get("MASTER_ADDR") or _first_host(
        environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST") or "127.0.0.1"
    )
    if environ.get("MASTER_PORT"):
        port = env_int("MASTER_PORT", environ)
    elif environ.get("SLURM_JOB_ID"):
        port = port_for_job(env_int("SLURM_JOB_ID", environ))
    else:
        port = DEFAULT_PORT
    return addr, port


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
            done = processes.run([scontrol, "show", "hostnames", nodelist], timeout=10)
        except OSError:
            done = None
        hosts = done.stdout.split() if done is not None and done.ok else []
        if hosts:
            return hosts[0]
        # else fall back to our parser, which covers the common syntax
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


# ---- launching on this node from inside a job ----------------------------------------------

# Variables that say who a process is in a job: torchrun's, and the MPI launchers' that srun's
# PMI plugins set. Slurm's are every SLURM_* but the allocation's sizes (LOCAL_LAUNCH_KEEPS).
LAUNCHER_VARS = (
    *TORCHRUN_VARS,
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_NAME",
    "ROLE_WORLD_SIZE",
)
LAUNCHER_PREFIXES = ("SLURM_", "TORCHELASTIC_", "PMI_", "PMIX_", "OMPI_COMM_WORLD_")
# What the job gave this node's processes: a local launch runs within it, so it keeps them.
LOCAL_LAUNCH_KEEPS = (
    "SLURM_CPUS_PER_TASK",
    "SLURM_CPUS_ON_NODE",
    "SLURM_MEM_PER_NODE",
    "SLURM_MEM_PER_CPU",
    "SLURM_MEM_PER_GPU",
)


@dataclass(frozen=True)
class LocalLaunch:
    """The environment for processes launched on this node by this one (a notebook's kernel
    inside a JupyterHub job, a program starting torchrun), and what was set aside for them."""

    environ: dict[str, str]
    set_aside: tuple[str, ...]
    note: str  # one line saying what was set aside and why; "" when nothing was


def _describes_the_job(name: str) -> bool:
    if name in LOCAL_LAUNCH_KEEPS:
        return False
    return name in LAUNCHER_VARS or name.startswith(LAUNCHER_PREFIXES)


def local_launch_environ(environ: Mapping[str, str] | None = None) -> LocalLaunch:
    """`environ` (default os.environ) without the variables that describe the job or launch
    this process is part of, so that what it launches on its own node is a launch of its own.

    A kernel that a centre's JupyterHub starts inside a Slurm job carries the job's variables:
    with SLURM_NTASKS=4 Lightning takes the local launch for the job's 4 tasks and refuses
    `devices=2`, stale RANK/WORLD_SIZE make torchrun's workers believe they are other ranks, a
    program would requeue the hub's job. The allocation's sizes (CPUs per task, memory) stay:
    the launch runs within them. Taught in lesson 05.
    """
    environ = dict(os.environ if environ is None else environ)
    aside = tuple(sorted(name for name in environ if _describes_the_job(name)))
    kept = {name: value for name, value in environ.items() if name not in aside}
    note = ""
    if aside:
        job = environ.get("SLURM_JOB_ID")
        whose = f"of Slurm job {job}" if job else "of the launch this process belongs to"
        shown = [f"{n}={environ[n]}" for n in _most_telling(aside)]
        more = f" and {len(aside) - len(shown)} more" if len(aside) > len(shown) else ""
        note = (
            f"local launch: set aside {', '.join(shown)}{more} {whose}: they describe that job, "
            "not this launch on this node"
        )
    return LocalLaunch(kept, aside, note)


def _most_telling(names: tuple[str, ...]) -> list[str]:
    """The few set-aside names a reader needs to recognise the job: who and how many."""
    first = [
        n for n in ("SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_PROCID", *TORCHRUN_VARS) if n in names
    ]
    return first or list(names[:3])
