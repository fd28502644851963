"""FSDP2 (`fully_shard`) in miniature: each rank keeps only its shard of every parameter.

    torchrun --standalone --nproc-per-node=2 -m course_utils.jobs.fsdp_demo

Prints, per rank, the parameter bytes it holds against the whole model's, then trains a few
steps (parameters are gathered for each layer's forward and backward, then freed again).
"""

from __future__ import annotations

import sys

import torch
from torch import nn

from course_utils import distributed


def local_bytes(model: nn.Module) -> int:
    """Bytes of parameters stored on this rank (a sharded DTensor counts its local shard)."""
    total = 0
    for p in model.parameters():
        local = p.to_local() if hasattr(p, "to_local") else p
        total += local.numel() * local.element_size()
    return total


def main(argv=None) -> int:
    torch.set_num_threads(1)
    env = distributed.init_process_group("gloo")
    fully_shard, route = distributed.import_fully_shard()
    if fully_shard is None:
        raise RuntimeError(f"{route}; FSDP2 needs PyTorch 2.6 or newer")
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(512, 512), nn.ReLU()) for _ in range(4)])
    full = sum(p.numel() * p.element_size() for p in model.parameters())
    for layer in model:  # shard layer by layer, so only one layer is ever gathered at a time
        fully_shard(layer)
    fully_shard(model)
    distributed.print0(f"route: {route}, {env.world_size} ranks, backend gloo")
    distributed.barrier()
    distributed.print_line(
        f"rank {env.rank}: holds {local_bytes(model) / 2**20:.2f} MiB of "
        f"{full / 2**20:.2f} MiB of parameters"
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 512)
    for step in range(3):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        distributed.print0(f"step {step}: loss {loss.item():.4f}")
    distributed.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
