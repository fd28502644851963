"""Which device a process computes on, and which backend its job uses: the one place that decides
both, and gates for cells.

The rule (`plan_ranks`) is a pure function of what each task of a job sees (`TaskView`: its
visible GPUs by UUID, what the node has, whether Slurm confines each task to its devices, the
compute mode), so tests pin every binding by passing the answers a node would give. It gives each
rank its GPU and picks nccl only where NCCL's path between a node's ranks can work:

- every rank of a node sees the GPUs the node's ranks train on (`--gpus-per-node=N` with a task
  per GPU, each rank on cuda:LOCAL_RANK; `--gpu-bind=none`; `--gres-flags=allow-task-sharing`;
  torchrun's workers), or each node has one rank;
- ranks that see only their own GPU (Slurm's per-task binding, `--gpus-per-task` alone) can still
  reach each other's through CUDA IPC where devices are not confined; where Slurm confines them
  (`ConstrainDevices=yes`, usual at GPU centres) CUDA IPC fails, and NCCL's intra-node path with
  it (NVIDIA/nccl#1066), so the rule picks gloo and says what to ask Slurm for instead;
- ranks that would share a GPU use gloo (NCCL refuses two ranks on one GPU), and under
  exclusive-process mode, which admits one process per GPU, they cannot share it at all.

`local_plan` / `local_device` apply it to this process (`pick_device` for a lone one);
`plan_device` is the same rule for a node whose ranks all see the same GPUs (counts alone).
`this_task` reads what this task sees. Taught in lesson 02 (one process), lesson 05 (ranks) and
lesson 10 (the bindings Slurm gives).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from course_utils import nvidia, processes

KINDS = ("cuda", "mps", "cpu")
ENV = "COURSE_DEVICE"
# What a job whose node's ranks cannot reach each other's GPUs asks Slurm for instead.
ROUTES = (
    "--gpus-per-node=N with --ntasks-per-node=N (every task sees the node's GPUs; each rank "
    "takes cuda:LOCAL_RANK), or keep --gpus-per-task with srun --gpu-bind=none, or with srun "
    "--gres-flags=allow-task-sharing (Slurm 23.11 and later)"
)


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
class TaskView:
    """What one task of a job sees: its node, its local rank, the UUIDs of the GPUs it may use
    (CUDA's order: cuda:0 first), CUDA_VISIBLE_DEVICES as it was set (None: unset), the GPUs
    the job holds on its node (Slurm's SLURM_GPUS_ON_NODE; None: not said), whether Slurm
    confines each task to its own devices (ConstrainDevices; None: not known) and whether its
    GPUs are in exclusive-process compute mode."""

    node: str
    local_rank: int
    uuids: tuple[str, ...] = ()
    visible: str | None = None
    node_gpus: int | None = None
    constrained: bool | None = None
    exclusive: bool = False

    def as_dict(self) -> dict:
        return {**self.__dict__, "uuids": list(self.uuids)}

    @classmethod
    def from_dict(cls, d: Mapping) -> TaskView:
        return cls(**{**d, "uuids": tuple(d["uuids"])})


@dataclass(frozen=True)
class DevicePlan:
    """One rank's device and its job's backend (the same on every rank), the UUID of its GPU,
    whether another rank of its node trains on that GPU, why (`why`, one line), the line local
    rank 0 says when the job runs other than one GPU per rank over nccl (`note`), and what to ask
    Slurm for instead (`ask`, "" when nothing)."""

    device: torch.device
    backend: str = "gloo"
    why: str = ""
    note: str = ""
    shares_gpu: bool = False
    uuid: str | None = None
    ask: str = ""


def _choice(choice: str | None, source: str) -> tuple[str | None, int | None]:
    if not choice:
        return None, None
    try:
        chosen = torch.device(choice)
    except RuntimeError as e:
        raise ValueError(f"{source}={choice!r} is not a device; use one of {KINDS}") from e
    if chosen.type not in KINDS:
        raise ValueError(f"{source}={choice!r}: device kind {chosen.type!r} is not one of {KINDS}")
    return chosen.type, chosen.index


def _taken(views: Sequence[TaskView], index: int | None) -> list[str | None]:
    """The UUID each rank trains on: GPU `index` of its own where one is named; else, among the
    ranks of a node that see the same GPUs, the i-th takes the i-th (round-robin when fewer)."""
    taken: list[str | None] = []
    for view in views:
        if not view.uuids or (index is not None and index >= len(view.uuids)):
            taken.append(None)
            continue
        if index is not None:
            taken.append(view.uuids[index])
            continue
        alike = sorted(v.local_rank for v in views if v.node == view.node and v.uuids == view.uuids)
        taken.append(view.uuids[alike.index(view.local_rank) % len(view.uuids)])
    return taken


def _cut_off(views: Sequence[TaskView], taken: Sequence[str | None]) -> dict[str, str]:
    """{node: why} for the nodes whose ranks cannot reach each other's GPUs over CUDA IPC: a
    rank that does not see a GPU another rank of its node trains on, where devices are (or may
    be) confined to each task."""
    found = {}
    for node in dict.fromkeys(v.node for v in views):
        mine = [(v, u) for v, u in zip(views, taken) if v.node == node]
        used = {u for _, u in mine}
        blind = [v for v, _ in mine if len(mine) > 1 and not used <= set(v.uuids)]
        if not blind or all(v.constrained is False for v in blind):
            continue
        said = (
            "Slurm confines each task to its devices (ConstrainDevices=yes): CUDA IPC"
            if all(v.constrained for v in blind)
            else "whether Slurm confines each task to its devices is not known here: where it "
            "does, CUDA IPC"
        )
        found[node] = (
            f"the ranks of {node} each see only their own GPU (per-task binding) and {said} "
            "between them fails, and NCCL's path within the node with it"
        )
    return found


def plan_ranks(
    views: Sequence[TaskView],
    rank: int,
    choice: str | None = None,
    mps: bool = False,
    source: str = "prefer",
) -> DevicePlan:
    """Rank `rank`'s device and the job's backend, from every rank's view (the same answer on
    every rank). `choice` ("cpu", "cuda", "cuda:1", "mps"; None: the best there is) comes from
    COURSE_DEVICE or the caller (`source` names which); a choice this rank cannot see raises
    ValueError instead of silently running somewhere else."""
    if not 0 <= rank < len(views):
        raise ValueError(
            f"rank {rank} is not among the {len(views)} views gathered: every rank of the job "
            "reports what it sees (pass them all, in rank order)"
        )
    kind, index = _choice(choice, source)
    view = views[rank]
    found = {"cuda": len(view.uuids), "mps": int(mps), "cpu": 1}.get(kind or "cuda")
    if kind is not None and found <= (index or 0):
        raise ValueError(
            f"{source}={choice!r} asks for a device this process cannot see ({found} {kind} "
            "device(s) found); unset it, or choose 'cpu'"
        )
    if kind in ("cpu", "mps") or not view.uuids:
        here = torch.device(kind or ("mps" if mps else "cpu"))
        why = f"{source}={choice}" if kind else "no GPU here"
        return DevicePlan(here, "gloo", f"the {here.type.upper()} ({why}): gloo")
    taken = _taken(views, index)
    uuid, gpu = taken[rank], view.uuids.index(taken[rank])
    device = torch.device("cuda", gpu)
    if any(u is None for u in taken):
        return DevicePlan(device, "gloo", "some rank has no GPU: gloo", uuid=uuid)
    ranks_here = [v for v in views if v.node == view.node]
    shared = sorted(_shared_nodes(views, taken))
    if shared:
        return _sharing(view, ranks_here, taken, rank, views, shared, index is not None)
    blocked = _cut_off(views, taken)
    if blocked:
        node, why = next(iter(blocked.items()))
        note = f"each rank has a GPU of its own, but {why}: gloo. For nccl ask for {ROUTES}"
        return DevicePlan(device, "gloo", note, note, uuid=uuid, ask=ROUTES)
    how = "one rank per node" if len(ranks_here) == 1 else _reach(ranks_here)
    why = f"a GPU of its own (sees {len(view.uuids)} GPU(s), trains on cuda:{gpu}; {how}): nccl"
    return DevicePlan(device, "nccl", why, uuid=uuid)


def _shared_nodes(views: Sequence[TaskView], taken: Sequence[str | None]) -> set[str]:
    """The nodes on which two ranks train on the same GPU."""
    pairs = [(v.node, u) for v, u in zip(views, taken)]
    return {node for node, u in pairs if pairs.count((node, u)) > 1}


def _reach(ranks_here: Sequence[TaskView]) -> str:
    if all(len(v.uuids) >= len(ranks_here) for v in ranks_here):
        return "the node's ranks see each other's GPUs"
    return "each task sees its own GPU, and devices are not confined (CUDA IPC reaches the others)"


def _sharing(view, ranks_here, taken, rank, views, shared, named: bool) -> DevicePlan:
    """A job in which ranks of a node would share a GPU: gloo, or the CPU where the GPUs admit
    one process each (exclusive-process mode)."""
    n, gpus = len(ranks_here), len({u for v in ranks_here for u in v.uuids})
    uuid = taken[rank]
    gpu = view.uuids.index(uuid)
    ask = f"--gpus-per-node={n} with --ntasks-per-node={n} (a GPU per task)"
    if view.node not in shared:
        why = (
            f"a GPU of its own, but ranks of {shared} share GPUs (NCCL refuses two ranks on one "
            "GPU): gloo"
        )
        return DevicePlan(torch.device("cuda", gpu), "gloo", why, why, False, uuid)
    if any(v.exclusive for v in ranks_here):
        note = (
            f"{n} ranks on this node would share {gpus} GPU(s), and exclusive-process mode lets "
            "one process at a time use a GPU (the second fails: CUDA-capable device(s) is/are "
            f"busy or unavailable): the ranks run on the CPU (gloo). Ask for {ask}, or for the "
            "centre's MPS"
        )
        return DevicePlan(torch.device("cpu"), "gloo", note, note, ask=ask)
    mine = sum(1 for v, u in zip(views, taken) if v.node == view.node and u == uuid) > 1
    note = (
        f"{n} processes on this node share {gpus} GPU(s)"
        + (" (one named for every rank)" if named else "")
        + f": local rank {view.local_rank} uses cuda:{gpu}; DDP ranks that share a GPU "
        "communicate over gloo (NCCL refuses two ranks on one GPU), and MPS runs them "
        "concurrently (slurm/mps_job.sh)"
    )
    return DevicePlan(torch.device("cuda", gpu), "gloo", note, note, mine, uuid, ask)


def plan_device(
    local_rank: int = 0,
    local_world_size: int = 1,
    choice: str | None = None,
    gpus: int = 0,
    mps: bool = False,
    source: str = "prefer",
    exclusive: bool = False,
) -> DevicePlan:
    """`plan_ranks` for one node whose `local_world_size` ranks all see the same `gpus` GPUs
    (torchrun's workers, `--gpus-per-node`, a laptop): counts alone decide there."""
    if local_world_size < 1 or not 0 <= local_rank < local_world_size:
        raise ValueError(
            f"local rank {local_rank} of {local_world_size} processes on this node: the local "
            "rank must be in 0..local_world_size-1; check LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun) "
            "or SLURM_LOCALID and --ntasks-per-node (srun)"
        )
    if gpus < 0:
        raise ValueError(f"gpus={gpus}: a node has 0 or more GPUs")
    uuids = tuple(f"GPU-{i}" for i in range(gpus))
    views = [TaskView("node", r, uuids, exclusive=exclusive) for r in range(local_world_size)]
    return plan_ranks(views, local_rank, choice, mps, source)


# ---- what this task sees ---------------------------------------------------------------------


def task_view(
    node: str,
    local_rank: int,
    environ: Mapping[str, str],
    count: int,
    uuid_of: Callable[[int], str | None],
    constrained: bool | None = None,
    exclusive: bool = False,
) -> TaskView:
    """What a task sees, from CUDA's device count and each device's UUID (`uuid_of(i)`; a
    stand-in built from CUDA_VISIBLE_DEVICES where PyTorch reports none) and Slurm's variables."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    entries = [v.strip() for v in (visible or "").split(",") if v.strip()]
    uuids = []
    for i in range(count):
        uuid = uuid_of(i)
        if uuid is None:  # an old PyTorch: the node and the index Slurm gave stand for the GPU
            uuid = f"{node}/cuda-visible-{entries[i] if i < len(entries) else i}"
        uuids.append(uuid)
    on_node = environ.get("SLURM_GPUS_ON_NODE", "")
    node_gpus = int(on_node) if on_node.isdigit() else None
    return TaskView(node, local_rank, tuple(uuids), visible, node_gpus, constrained, exclusive)


def constrains_devices(config: str) -> bool | None:
    """ConstrainDevices from `scontrol show config`'s text: True, False, or None if not said."""
    m = re.search(r"^\s*ConstrainDevices\s*=\s*(\w+)", config, re.MULTILINE)
    return None if m is None else m[1].lower() == "yes"


def slurm_constrains_devices(environ: Mapping[str, str]) -> bool | None:
    """Whether Slurm confines this job's tasks to their devices: False outside a Slurm job
    (nothing here does), else scontrol's answer (None where it gives none)."""
    if not environ.get("SLURM_JOB_ID"):
        return False
    if shutil.which("scontrol") is None:
        return None
    done = processes.run(["scontrol", "show", "config"], timeout=30)
    return constrains_devices(done.stdout) if done.ok else None


def this_task(node: str, local_rank: int, use_gpus: bool = True, environ=None) -> TaskView:
    """What this process sees (no GPU when `use_gpus` is False: a CPU run), and, where it sees
    GPUs, whether Slurm confines devices and whether they are in exclusive-process mode."""
    environ = os.environ if environ is None else environ
    count = gpu_count() if use_gpus else 0

    def uuid_of(i: int) -> str | None:
        return nvidia.torch_uuid(torch.cuda.get_device_properties(i))

    seen = task_view(node, local_rank, environ, count, uuid_of)
    if not seen.uuids:
        return seen
    listed = nvidia.gpus()
    exclusive = any(nvidia.is_exclusive(nvidia.mode_of(listed, u) or "") for u in seen.uuids)
    constrained = slurm_constrains_devices(environ)
    return TaskView(**{**seen.__dict__, "constrained": constrained, "exclusive": exclusive})


# ---- this process -----------------------------------------------------------------------------


def local_plan(
    local_rank: int = 0,
    local_world_size: int = 1,
    prefer: str | None = None,
    views: Sequence[TaskView] | None = None,
    rank: int | None = None,
) -> DevicePlan:
    """This process's plan, from env COURSE_DEVICE, else `prefer`, else the hardware: the views
    of every rank of the job (`views`, this rank's at `rank`) where they were gathered, else a
    node whose ranks all see what this process sees. Local rank 0 prints the plan's note."""
    choice = os.environ.get(ENV) or prefer
    source = ENV if os.environ.get(ENV) else "prefer"
    mps = bool(_available("mps"))
    if views is not None:
        plan = plan_ranks(views, local_rank if rank is None else rank, choice, mps, source)
    else:
        plan = plan_device(local_rank, local_world_size, choice, gpu_count(), mps, source)
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
