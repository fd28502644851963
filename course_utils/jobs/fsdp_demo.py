"""FSDP2 (`fully_shard`) in miniature: each rank keeps only its shard of every parameter, and the
sharded model trains exactly as one unsharded copy would.

    torchrun --standalone --nproc-per-node=2 -m course_utils.jobs.fsdp_demo

Prints, per rank, the parameter bytes it holds against the whole model's; then trains a few SGD
steps on each rank's own data (parameters are gathered for each layer's forward and backward,
then freed again) and compares the gathered result with one process that trains an unsharded
copy on all ranks' data. Taught in lesson 05.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh

from course_utils import distributed

STEPS, BATCH, WIDTH, LR = 5, 32, 512, 2.0


def local_bytes(model: nn.Module) -> int:
    """Bytes of parameters stored on this rank (a sharded DTensor counts its local shard)."""
    total = 0
    for p in model.parameters():
        local = p.to_local() if hasattr(p, "to_local") else p
        total += local.numel() * local.element_size()
    return total


def shard(model: nn.Module, fully_shard, world_size: int) -> None:
    """Shard layer by layer (so only one layer is ever gathered at a time) over a CPU mesh. FSDP2's
    default mesh takes the machine's accelerator: on a GPU node it would move the parameters to
    cuda:0 while this demo's batches and its gloo group stay on the CPU."""
    mesh = init_device_mesh("cpu", (world_size,))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)


def build_model() -> nn.Module:
    torch.manual_seed(0)  # the same initial weights on every rank and in the reference
    return nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(4)])


def batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s data: inputs and the targets of a fixed linear map (a learnable task)."""
    x = torch.randn(BATCH, WIDTH, generator=torch.Generator().manual_seed(100 + rank))
    w = torch.randn(WIDTH, WIDTH, generator=torch.Generator().manual_seed(7))  # one map for all
    return x, torch.tanh(x @ w / WIDTH**0.5)


def train(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> list[float]:
    """STEPS SGD steps on the mean squared error over `batches`; the loss before each step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        loss = sum(nn.functional.mse_loss(model(x), y) for x, y in batches) / len(batches)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def main(argv=None) -> int:
    torch.set_num_threads(1)
    env = distributed.init_process_group("gloo")
    fully_shard, route = distributed.import_fully_shard()
    if fully_shard is None:
        raise RuntimeError(f"{route}; FSDP2 needs PyTorch 2.6 or newer")
    model = build_model()
    full = sum(p.numel() * p.element_size() for p in model.parameters())
    shard(model, fully_shard, env.world_size)
    distributed.print0(f"route: {route}, {env.world_size} ranks, backend gloo")
    distributed.barrier()
    distributed.print_line(
        f"rank {env.rank}: holds {local_bytes(model) / 2**20:.2f} MiB of "
        f"{full / 2**20:.2f} MiB of parameters"
    )
    why = distributed.fsdp2_trains_on_cpu()
    if why:
        distributed.print0(f"{why}: training skipped here")
    else:
        losses = train(model, [batch(env.rank)])  # the mean over ranks: FSDP averages gradients
        gathered = [p.full_tensor() for p in model.parameters()]  # a collective: every rank
        if distributed.is_main_process():
            reference = build_model()
            ref_losses = train(reference, [batch(r) for r in range(env.world_size)])
            diff = max((g - r).abs().max().item() for g, r in zip(gathered, reference.parameters()))
            for step, loss in enumerate(losses):
                distributed.print_line(f"step {step}: loss on rank 0's data {loss:.4f}")
            distributed.print_line(
                f"one unsharded copy on all ranks' data: loss {ref_losses[0]:.4f} -> "
                f"{ref_losses[-1]:.4f}; largest parameter difference from it {diff:.1e}"
            )
    distributed.barrier()  # every rank done before any tears the group down
    distributed.cleanup()
    return 0


if __name__ == "__main__":
    # Skips interpreter teardown: with FSDP2's sharded parameters still alive, it aborted now and
    # then ("terminate called without an active exception", SIGABRT) after the work was done.
    distributed.exit_now(main())
