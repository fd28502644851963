"""Which GPU each rank of a lab job trains on, and whether the job can use NCCL: decided from
what every task sees. Taught in lesson 10.

Slurm gives each task its GPUs: with `--gpus-per-task=1` (Slurm 21.08 and newer) each task is
bound to one GPU of its own and sees only that one, as `cuda:0`, whatever its local rank. With
the node's GPUs all visible (torchrun's workers, a job without per-task binding) local rank k
takes `cuda:k`. A rank that would share its GPU with another rank of its node (fewer GPUs than
ranks) makes the whole job use gloo: NCCL refuses two ranks on one GPU. Counting GPUs is not
enough to tell these apart (a task bound to one GPU and a task of a one-GPU node both see one),
so every rank reports what it sees, by UUID, and every rank decides the same from all reports:

    views = measure.gather(gpus.this_task(node, local_rank))   # what each task sees
    mine = gpus.plan(views, rank)                               # its device, the job's backend

`plan` is a pure function of the views, tested with Slurm's and CUDA's answers injected
(tests/test_lab_gpus.py); `nvml_index` finds the GPU a rank trains on among nvidia-smi's, by
UUID, so that each rank samples its own GPU (CUDA's, NVML's and a cgroup-constrained step's
indices need not agree).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from course_utils import nvidia


@dataclass(frozen=True)
class View:
    """What one task sees: its node, its local rank, the UUIDs of the GPUs it may use (in CUDA's
    order: cuda:0 first) and CUDA_VISIBLE_DEVICES as Slurm set it (None: not set)."""

    node: str
    local_rank: int
    uuids: tuple[str, ...]
    visible: str | None = None

    def as_dict(self) -> dict:
        return {
            "node": self.node,
            "local_rank": self.local_rank,
            "uuids": list(self.uuids),
            "visible": self.visible,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> View:
        return cls(str(d["node"]), int(d["local_rank"]), tuple(d["uuids"]), d.get("visible"))


@dataclass(frozen=True)
class Plan:
    """One rank's device (`index` of cuda, None on the CPU), the GPU's UUID, whether another
    rank of its node trains on the same GPU, the job's backend, and a line saying why."""

    index: int | None
    uuid: str | None
    shares: bool
    backend: str
    note: str

    @property
    def device(self) -> str:
        return "cpu" if self.index is None else f"cuda:{self.index}"


def task_view(
    node: str,
    local_rank: int,
    environ: Mapping[str, str],
    count: int,
    uuid_of: Callable[[int], str | None],
) -> View:
    """What a task sees, from CUDA's device count and each device's UUID (`uuid_of(i)`; a
    stand-in built from CUDA_VISIBLE_DEVICES where PyTorch reports none)."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    entries = [v.strip() for v in (visible or "").split(",") if v.strip()]
    uuids = []
    for i in range(count):
        uuid = uuid_of(i)
        if uuid is None:  # an old PyTorch: the node and the index Slurm gave stand for the GPU
            uuid = f"{node}/cuda-visible-{entries[i] if i < len(entries) else i}"
        uuids.append(uuid)
    return View(node, local_rank, tuple(uuids), visible)


def this_task(node: str, local_rank: int, use_gpus: bool = True) -> View:
    """What this process sees (no GPU when `use_gpus` is False: a CPU run)."""
    import torch

    count = torch.cuda.device_count() if use_gpus and torch.cuda.is_available() else 0

    def uuid_of(i: int) -> str | None:
        return nvidia.torch_uuid(torch.cuda.get_device_properties(i))

    return task_view(node, local_rank, os.environ, count, uuid_of)


def _taken(views: Sequence[View]) -> list[str | None]:
    """The UUID each rank trains on: among the ranks of a node that see the same GPUs, the i-th
    takes the i-th of them (round-robin when there are fewer GPUs than ranks)."""
    taken: list[str | None] = []
    for view in views:
        alike = sorted(v.local_rank for v in views if v.node == view.node and v.uuids == view.uuids)
        i = alike.index(view.local_rank)
        taken.append(view.uuids[i % len(view.uuids)] if view.uuids else None)
    return taken


def plan(views: Sequence[View], rank: int) -> Plan:
    """Rank `rank`'s device and the job's backend, from every rank's view (the same answer on
    every rank): nccl when every rank has a GPU that no other rank of its node trains on, else
    gloo (some rank has no GPU, or two ranks of a node would share one)."""
    if not 0 <= rank < len(views):
        raise ValueError(f"rank {rank} is not among the {len(views)} views gathered")
    taken = _taken(views)
    on_node = [(v.node, u) for v, u in zip(views, taken) if u is not None]
    shared = [u is not None and on_node.count((v.node, u)) > 1 for v, u in zip(views, taken)]
    view, uuid = views[rank], taken[rank]
    index = None if uuid is None else view.uuids.index(uuid)
    if all(u is not None for u in taken) and not any(shared):
        seen = f"sees {len(view.uuids)} GPU(s)"
        note = f"a GPU of its own ({seen}, trains on cuda:{index}): nccl"
        return Plan(index, uuid, False, "nccl", note)
    if uuid is None:
        why = "no GPU here" if not any(taken) else "some rank has no GPU"
        return Plan(None, None, False, "gloo", f"the CPU ({why}): gloo")
    note = (
        f"{'shares its GPU' if shared[rank] else 'a GPU of its own'}, but ranks of "
        f"{sorted({v.node for v, s in zip(views, shared) if s})} share GPUs (NCCL refuses two "
        "ranks on one GPU): gloo"
    )
    return Plan(index, uuid, shared[rank], "gloo", note)


def nvml_index(uuid: str | None, gpus: Sequence[nvidia.Gpu]) -> int | None:
    """nvidia-smi's (and NVML's) index of the GPU with this UUID, or None where it is not
    listed (no nvidia-smi, or no UUID)."""
    if uuid is None:
        return None
    found = [g.index for g in gpus if g.uuid == uuid]
    return found[0] if found else None
