"""One process, one device: the smallest training program (lesson 05's starting point).

    python -m course_utils.jobs.single_process --batch-size 64 --steps 8 --seed 3

course_utils/jobs/ddp_minimal.py is the same program made data-parallel; lesson 05 shows the two
side by side as a diff. Both print a checksum of the final parameters and can save them.
`seeded` is the one definition of a run's model and data at a seed: exercise 05's program
(jobs/ddp_exercise.py) and its checker start from it too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, RandomSampler

from course_utils import models
from course_utils.checkpoint import atomic_torch_save
from course_utils.data import SyntheticCIFAR10
from course_utils.device import pick_device
from course_utils.job_config import parse, shared


def seeded(seed: int, images: int = 1024) -> tuple[torch.nn.Module, SyntheticCIFAR10]:
    """The lesson CNN initialised from `seed`, and `images` synthetic images drawn from `seed`."""
    torch.manual_seed(seed)
    return models.Net(), SyntheticCIFAR10(size=images, seed=seed)


def train(model, dataset, batch_size: int, lr: float, steps: int, device) -> torch.nn.Module:
    """`steps` SGD steps of `model` on shuffled batches of `dataset` (one epoch at most)."""
    sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(0))
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step, (inputs, targets) in enumerate(loader):
        if step == steps:
            break
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss_fn(model(inputs), targets).backward()
        optimizer.step()
    return model


@dataclass(kw_only=True)
class Options:
    batch_size: int = shared("batch_size", 64)
    lr: float = shared("lr", 0.01)
    steps: int = shared("steps", 8)
    seed: int = shared("seed", 0)
    save: str | None = shared("save")


def main(argv=None) -> int:
    args = parse(Options, argv, __doc__)
    device = pick_device()
    model, dataset = seeded(args.seed)
    model = model.to(device)
    train(model, dataset, args.batch_size, args.lr, args.steps, device)
    print(f"parameter checksum {models.parameter_hash(model)}")
    if args.save:
        atomic_torch_save(model.state_dict(), args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
