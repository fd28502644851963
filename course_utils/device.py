"""Which device a process computes on: the one place that decides it, and gates for cells.

`local_device` is the decision for every process of the course: a notebook, a one-device script,
each rank of a DDP job. `pick_device` is the same decision for a single process. The rule is a
pure function of the hardware's answers (`plan_device`), so tests pin each branch by passing the
GPU count a node would report. Taught in lesson 02 (one process) and lesson 05 (ranks).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

KINDS = ("cuda", "mps", "cpu")
ENV = "COURSE_DEVICE"


def _available(kind: str) -> int:
    """How many devices of `kind` this process can use."""
    if kind == "cuda":
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        return int(mps is not None and mps.is_available())
    if kind == "cpu":
        return 1
    raise ValueError(f"device kind {kind!r} is not one of {KINDS}; pass one of those")


def gpu_count() -> int:
    """CUDA GPUs this process can see (0 without a driver or with CUDA_VISIBLE_DEVICES empty)."""
    return _available("cuda")


@dataclass(frozen=True)
class DevicePlan:
    """The decision, whether this rank shares its GPU with other local ranks (then its group
    must use gloo: NCCL refuses two ranks on one GPU), and the one line that says so."""

    device: torch.device
    note: str = ""
    shares_gpu: bool = False


def plan_device(
    local_rank: int = 0,
    local_world_size: int = 1,
    choice: str | None = None,
    gpus: int = 0,
    mps: bool = False,
    source: str = "prefer",
) -> DevicePlan:
    """The device of local rank `local_rank` of `local_world_size` on a node with `gpus` GPUs.

    `choice` ("cpu", "cuda", "cuda:1", "mps"; None: the best there is) comes from COURSE_DEVICE
    or the caller (`source` names which, for the error message). Without a choice: one GPU per
    local rank when there are enough (cuda:<local_rank>); fewer GPUs than ranks: ranks share them
    round-robin, and the note says so (NCCL refuses two ranks on one GPU, so such a job uses
    gloo, see `distributed.choose_backend`); no GPU: mps, else cpu. A choice that this process
    cannot see raises ValueError instead of silently running somewhere else.
    """
    if local_world_size < 1 or not 0 <= local_rank < local_world_size:
        raise ValueError(
            f"local rank {local_rank} of {local_world_size} processes on this node: the local "
            "rank must be in 0..local_world_size-1; check LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun) "
            "or SLURM_LOCALID and --ntasks-per-node (srun)"
        )
    kind = torch.device(choice).type if choice else ("cuda" if gpus else "mps" if mps else "cpu")
    if kind not in KINDS:
        raise ValueError(f"{source}={choice!r}: device kind {kind!r} is not one of {KINDS}")
    found = {"cuda": gpus, "mps": int(mps), "cpu": 1}[kind]
    index = torch.device(choice).index if choice else None
    if found <= (index or 0):
        raise ValueError(
            f"{source}={choice!r} asks for a device this process cannot see ({found} {kind} "
            "device(s) found); unset it, or choose 'cpu'"
        )
    if kind != "cuda":
        return DevicePlan(torch.device(kind))
    if index is None:
        index = local_rank % found
    # fewer GPUs than ranks, or one GPU named for every rank (COURSE_DEVICE=cuda:0)
    sharing = local_world_size > found or (choice is not None and ":" in choice)
    if not sharing or local_world_size == 1:
        return DevicePlan(torch.device("cuda", index))
    note = (
        f"{local_world_size} processes on this node share {found} GPU(s): local rank "
        f"{local_rank} uses cuda:{index}; DDP ranks that share a GPU communicate over gloo (NCCL "
        "refuses two ranks on one GPU), and MPS runs them concurrently (slurm/mps_job.sh)"
    )
    return DevicePlan(torch.device("cuda", index), note, shares_gpu=True)


def local_plan(
    local_rank: int = 0, local_world_size: int = 1, prefer: str | None = None
) -> DevicePlan:
    """This process's device plan, from env COURSE_DEVICE, else `prefer`, else the hardware;
    when ranks must share GPUs, local rank 0 prints one line saying so."""
    choice = os.environ.get(ENV) or prefer
    source = ENV if os.environ.get(ENV) else "prefer"
    plan = plan_device(
        local_rank, local_world_size, choice, gpu_count(), bool(_available("mps")), source
    )
    if plan.note and local_rank == 0:
        print(plan.note, flush=True)
    return plan


def local_device(
    local_rank: int = 0, local_world_size: int = 1, prefer: str | None = None
) -> torch.device:
    """This process's device: env COURSE_DEVICE, else `prefer`, else the best for its local rank.

    cuda:<local_rank> when the node has a GPU per local rank; when ranks must share GPUs, local
    rank 0 prints one line saying so. Without GPUs: mps, else cpu.
    """
    return local_plan(local_rank, local_world_size, prefer).device


def pick_device(prefer: str | None = None) -> torch.device:
    """The device for a single process: `local_device(0, 1, prefer)`. Taught in lesson 02."""
    return local_device(0, 1, prefer)


def requires(kind: str, count: int = 1) -> bool:
    """True when `count` devices of `kind` are present; else print why the cell is skipped."""
    found = _available(kind)
    if found >= count:
        return True
    names = {"cuda": "CUDA GPU", "mps": "Apple MPS device", "cpu": "CPU"}
    plural = "s" if count > 1 else ""
    print(f"skipped here: needs {count} {names[kind]}{plural}, found {found or 'none'}")
    return False


def synchronize(device: torch.device | str) -> None:
    """Wait for queued work on `device` (a no-op on the CPU, which runs synchronously)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
