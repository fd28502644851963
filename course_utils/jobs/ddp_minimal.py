"""The same program, data-parallel: `jobs/single_process.py` plus the DDP diff (lesson 05).

    torchrun --standalone --nproc-per-node=2 -m course_utils.jobs.ddp_minimal --batch-size 32

What changes: join a process group; pick this rank's device; give each rank its share of the
data (DistributedSampler, set_epoch); wrap the model in DistributedDataParallel (gradients are
averaged during backward); let rank 0 alone print and save. 2 ranks x batch 32 train like one
process with batch 64. course_utils/jobs/ddp_train.py is the full program with options.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from course_utils import distributed, models
from course_utils.checkpoint import atomic_torch_save
from course_utils.device import local_device
from course_utils.job_config import parse, shared
from course_utils.jobs.single_process import seeded


def train(model, dataset, batch_size: int, lr: float, steps: int, device) -> torch.nn.Module:
    """`steps` SGD steps on this rank's share of each global batch (one epoch at most)."""
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    sampler.set_epoch(0)  # a new shuffle each epoch, the same on every rank
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step, (inputs, targets) in enumerate(loader):
        if step == steps:
            break
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss_fn(ddp(inputs), targets).backward()
        optimizer.step()
    return model


@dataclass(kw_only=True)
class Options:
    batch_size: int = shared("batch_size", 32)  # per rank: 2 ranks x 32 = single_process's 64
    lr: float = shared("lr", 0.01)
    steps: int = shared("steps", 8)
    seed: int = shared("seed", 0)
    save: str | None = shared("save")


def main(argv=None) -> int:
    args = parse(Options, argv, __doc__)
    env = distributed.init_process_group()
    device = local_device(env.local_rank, env.local_world_size)
    model, dataset = seeded(args.seed)
    model = model.to(device)
    train(model, dataset, args.batch_size, args.lr, args.steps, device)
    distributed.print_line(f"rank {env.rank}: parameter checksum {models.parameter_hash(model)}")
    if args.save and distributed.is_main_process():
        atomic_torch_save(model.state_dict(), args.save)
    distributed.barrier()
    distributed.cleanup()
    return 0


if __name__ == "__main__":
    distributed.exit_now(main())
