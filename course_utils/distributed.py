"""Distributed training: process groups, rank 0 and printing from ranks.

Who this process is comes from `course_utils.ranks` (`DistEnv.from_environ`: torchrun's variables,
else Slurm's, else rank 0 of 1); starting ranks on this node from `course_utils.launching`
(`launch`: torchrun); reading what ranks printed from `course_utils.rank_logs` (`failure_cause`).
`DistEnv`, `expand_hostlist` and `launch` are the course's published names under this module
(docs/conventions.md), so exactly these three are importable here too; every other name is imported
from the module that defines it. `init_process_group` joins the group with the device plan of
`device.local_plan` and the backend that plan implies (`backend_for`), and records what it chose:
`state()`, `is_main_process()` and `collective_device()` read that record. Taught in lesson 05.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from course_utils import launching
from course_utils.device import ENV as DEVICE_VARIABLE
from course_utils.device import (
    DevicePlan,
    TaskView,
    gpu_count,
    local_plan,
    plan_device,
    this_task,
)

# The course's published names under this module; each is defined once, where the docstring says.
from course_utils.launching import launch  # noqa: F401, E402
from course_utils.ranks import (
    DistEnv,
    batch_script_warning,
    expand_hostlist,  # noqa: F401, E402
    node_name,
)


def choose_backend(local_world_size: int, gpu_count: int) -> str:
    """The backend of a node whose `local_world_size` ranks all see the same `gpu_count` GPUs
    (torchrun's workers, `--gpus-per-node`; gpu_count=0 for a job on the CPU): "nccl" only
    when every local rank has a GPU of its own, else "gloo". The device rule's answer for counts
    alone (`device.plan_device`); under Slurm's per-task binding counts do not tell, and
    `init_process_group` decides from what every task sees (`device.plan_ranks`).

    NCCL refuses two ranks on one GPU ("Duplicate GPU detected"); gloo all-reduces CPU tensors
    and CUDA tensors alike, which is how the cluster documentation runs several DDP replicas on
    one GPU ("NCCL does not work on a single GPU").
    """
    if local_world_size < 1 or gpu_count < 0:
        raise ValueError(
            f"local_world_size={local_world_size} must be >= 1 and gpu_count={gpu_count} >= 0"
        )
    return plan_device(0, local_world_size, gpus=gpu_count).backend


def backend_for(plan: DevicePlan) -> str:
    """The backend a rank's device plan decided (the same on every rank of the job): "nccl" for
    a GPU of its own that the node's other ranks can reach, else "gloo"."""
    return plan.backend


VIEW_KEY = "course/task-view"  # where each rank leaves what it sees in the job's store


def _join_store(env: DistEnv, timeout: float):
    """The job's key-value store, as init_method="env://" finds it: torchrun's agent's, else
    the one rank 0 serves at MASTER_ADDR:MASTER_PORT."""
    wait = timedelta(seconds=timeout)
    store, _, _ = next(dist.rendezvous("env://", env.rank, env.world_size, timeout=wait))
    store.set_timeout(wait)
    return store


def _this_task(env: DistEnv) -> TaskView:
    return this_task(node_name(), env.local_rank, os.environ.get(DEVICE_VARIABLE) != "cpu")


def gathered_views(store, env: DistEnv, mine: TaskView) -> list[TaskView]:
    """Every rank's view, in rank order: each leaves its own in the store and reads the others'
    (a read waits until that rank has written). Keys carry the restart count, so a job that
    torchrun restarts never reads the last attempt's views."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT") or os.environ.get(
        "SLURM_RESTART_COUNT", "0"
    )
    key = f"{VIEW_KEY}/{attempt}"
    store.set(f"{key}/{env.rank}", json.dumps(mine.as_dict()))
    found = [json.loads(store.get(f"{key}/{r}")) for r in range(env.world_size)]
    return [TaskView.from_dict(v) for v in found]


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

    device: default the device of `device.local_plan`, decided from what every rank sees (each
    leaves its `device.TaskView` in the job's store first, so a rank knows whether its node's
    ranks share a GPU or can reach each other's); a GPU becomes the current CUDA device.
    backend: default the one that plan decided, so ranks that share a GPU, or cannot reach each
    other's, use gloo; for a `device` you pass, `choose_backend(local world size, GPUs)`.
    timeout: seconds to wait for all ranks; a rank that never comes, or a port in use, gives a
    RuntimeError that says which instead of a hang.
    """
    global _STATE
    env = env or DistEnv.from_environ()
    warning = batch_script_warning()
    if warning:
        print_line(warning)
    port = env.master_port
    if env.source == "none" and "MASTER_PORT" not in os.environ:
        port = (
            launching.free_port()
        )  # a lone process: any free port, so two notebooks do not collide
    # env:// works under torchrun (which serves the store itself) and under srun (we fill it in).
    os.environ.update(
        MASTER_ADDR=env.master_addr,
        MASTER_PORT=str(port),
        RANK=str(env.rank),
        WORLD_SIZE=str(env.world_size),
        LOCAL_RANK=str(env.local_rank),
    )
    chosen = backend or "gloo"
    try:
        store = _join_store(env, timeout)
        views = gathered_views(store, env, _this_task(env)) if device is None else None
    except Exception as e:  # the store raises several types (DistStoreError, ...)
        raise RuntimeError(join_error(env, port, chosen, timeout, e)) from e
    if device is None:
        plan = local_plan(env.local_rank, env.local_world_size, views=views, rank=env.rank)
        device, implied = plan.device, backend_for(plan)
    else:
        gpus = gpu_count() if device.type == "cuda" else 0
        implied = choose_backend(env.local_world_size, gpus)
    chosen = backend or implied
    if device.type == "cuda":
        torch.cuda.set_device(device)
    try:
        dist.init_process_group(
            chosen,
            store=dist.PrefixStore("default_pg", store),
            rank=env.rank,
            world_size=env.world_size,
            timeout=timedelta(seconds=timeout),
        )
    except Exception as e:  # the backends raise several types
        raise RuntimeError(join_error(env, port, chosen, timeout, e)) from e
    _STATE = GroupState(env, chosen, device)
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


def fsdp2_trains_on_cpu() -> str | None:
    """Why FSDP2 cannot train on the CPU with this PyTorch, or None when it can: its forward and
    backward record events on the device's streams, and PyTorch 2.6's CPU stream has no
    `record_event` ("'Stream' object has no attribute 'record_event'"); sharding itself works."""
    if hasattr(torch.cpu, "Stream") and hasattr(torch.cpu.Stream, "record_event"):
        return None
    return (
        f"PyTorch {torch.__version__}'s CPU streams have no record_event, which FSDP2's forward "
        "needs on the CPU (the course's tested release has it)"
    )


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
