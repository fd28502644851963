"""torch.distributed.checkpoint (DCP): every rank saves its own shard; load with another world size.

With FSDP (or any sharded model) no rank holds the whole model, so "rank 0 saves" does not work.
DCP writes one file per rank plus a `.metadata` file describing which slice of each tensor lies
where, and loads into whatever sharding the reader has: 2 ranks can save and 1 process (or 8)
can load. Here the model is sharded with FSDP2's `fully_shard` on the CPU (gloo) when this
PyTorch has it, else replicated with DDP (DCP then stores one copy).

    folder = save_sharded(tmp, world_size=2)    # spawns 2 ranks, each writes its shard
    model = load_unsharded(folder, TinyNet())   # one plain process reads them all

Taught in lesson 06.
"""

from __future__ import annotations

import gc
import inspect
import os
import tempfile
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp

from course_utils.distributed import import_fully_shard
from course_utils.models import TinyNet


def _shard(model: torch.nn.Module, world_size: int) -> tuple[torch.nn.Module, str]:
    fully_shard, _ = import_fully_shard()
    if fully_shard is not None:
        from torch.distributed.device_mesh import init_device_mesh

        fully_shard(model, mesh=init_device_mesh("cpu", (world_size,)))
        return model, "FSDP2 fully_shard"
    return torch.nn.parallel.DistributedDataParallel(model), "DDP (replicated)"


def _save_shard(folder: str, world_size: int, seed: int) -> None:
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    torch.manual_seed(seed)  # every rank builds the same model, then keeps its shard
    model, route = _shard(TinyNet(), world_size)
    state = {"model": get_model_state_dict(model), "route": route}
    dcp.save(state, checkpoint_id=folder)  # every rank writes; rank 0 also the metadata


def _save_worker(rank: int, world_size: int, folder: str, store: str, seed: int) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    try:
        _save_shard(folder, world_size, seed)
        # Both ranks past the last collective before either tears gloo down: a rank destroying
        # its group while the other still has a send in flight aborts ("terminate called ...").
        dist.barrier()
    finally:
        # The sharded model's parameters hold the device mesh and its groups: freed here (the
        # function above has returned), not by the interpreter's exit after gloo is gone.
        gc.collect()
        dist.destroy_process_group()


def save_sharded(folder: str | os.PathLike, world_size: int = 2, seed: int = 0) -> Path:
    """Start `world_size` CPU ranks (gloo) that shard TinyNet(seed) and save it with DCP."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # the ranks meet through a file store
        store = os.path.join(tmp, "store")
        mp.spawn(_save_worker, args=(world_size, str(folder), store, seed), nprocs=world_size)
    return folder


def shard_layout(folder: str | os.PathLike) -> dict[str, list[tuple]]:
    """From DCP's metadata: for each tensor, the (offsets, sizes) of the chunks saved."""
    meta = dcp.FileSystemReader(str(folder)).read_metadata()
    layout = {}
    for key, item in meta.state_dict_metadata.items():
        chunks = getattr(item, "chunks", None)
        if chunks is not None:
            layout[key] = [(tuple(c.offsets), tuple(c.sizes)) for c in chunks]
    return layout


def load_unsharded(folder: str | os.PathLike, model: torch.nn.Module) -> torch.nn.Module:
    """Load a DCP checkpoint into a plain model in this single process (no process group)."""
    state = {"model": model.state_dict()}
    kwargs = {"no_dist": True} if "no_dist" in inspect.signature(dcp.load).parameters else {}
    with warnings.catch_warnings():  # "assuming the intent is to load in a single process": yes
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.load(state, checkpoint_id=str(folder), **kwargs)  # fills the tensors in place
    model.load_state_dict(state["model"])
    return model
