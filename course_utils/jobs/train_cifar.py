"""Train the lesson CNN on CIFAR-10 on one device: the script lesson 02 builds, as a module.

    python -m course_utils.jobs.train_cifar --epochs 2            # GPU if there is one, else CPU
    python -m course_utils.jobs.train_cifar --disable-cuda        # force the CPU
    srun python -m course_utils.jobs.train_cifar --threads $SLURM_CPUS_PER_TASK

It follows the general steps of the cluster documentation: read the data; scale, split, convert to
tensors and load; design the network; define loss and optimizer; train; apply to the test set;
display the results.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from course_utils import data, hpc, models, train
from course_utils.device import local_device
from course_utils.job_config import option, parse, shared
from course_utils.ranks import DistEnv, batch_script_warning


@dataclass(kw_only=True)
class Options:
    epochs: int = shared("epochs", 1)
    batch_size: int = shared("batch_size", 128)
    lr: float = shared("lr", 0.05)
    num_workers: int | None = option(
        None,
        "DataLoader workers (unset: one per allocated CPU on a GPU, none on the CPU)",
        minimum=0,
    )
    threads: int | None = shared("threads")
    disable_cuda: bool = shared("disable_cuda")
    max_steps: int | None = shared("max_steps")
    data_root: str | None = option(None, "CIFAR-10 folder (unset: $COURSE_DATA or ./data)")
    seed: int = shared("seed", 0)
    no_progress: bool = option(False, "no progress bar (batch jobs)")


def parse_args(argv=None) -> Options:
    return parse(Options, argv, __doc__)


def main(argv=None) -> int:
    args = parse_args(argv)
    warning = batch_script_warning()
    if warning:
        print(warning)
    # Several tasks of one job (slurm/mps_job.sh's independent runs) each train on their own:
    # offset the seed by the task number, or they would all print the same losses.
    env = DistEnv.from_environ()
    seed = args.seed + env.rank
    if env.world_size > 1:
        print(f"task {env.rank} of {env.world_size}: seed {seed} (--seed {args.seed} + task)")
    torch.manual_seed(seed)
    threads = hpc.configure_threads(args.threads)
    # The documentation's pattern: --disable-cuda wins, else the best device for this task.
    prefer = "cpu" if args.disable_cuda else None
    device = local_device(env.local_rank, env.local_world_size, prefer)
    workers = hpc.loader_workers(device) if args.num_workers is None else args.num_workers
    print(
        f"device {device}, {threads} torch threads, {hpc.allocated_cpus()} allocated CPUs, "
        f"{workers} DataLoader workers"
    )

    # Read the data; it is scaled and converted to tensors by the dataset; load in batches.
    train_set = data.cifar10(args.data_root, train=True)
    test_set = data.cifar10(args.data_root, train=False)
    pin = device.type == "cuda"
    train_loader = data.make_loader(
        train_set, args.batch_size, num_workers=workers, pin_memory=pin, seed=seed
    )
    test_loader = data.make_loader(
        test_set, 512, shuffle=False, num_workers=workers, pin_memory=pin
    )
    # Design the network; define loss and optimizer.
    model = models.Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    # Train, then apply to the test set and display the results.
    for epoch in range(1, args.epochs + 1):
        stats = train.train_one_epoch(
            model,
            train_loader,
            optimizer,
            device=device,
            progress=not args.no_progress,
            max_steps=args.max_steps,
            non_blocking=pin,
        )
        print(f"epoch {epoch}: train {stats}")
    test = train.evaluate(model, test_loader, device=device, progress=not args.no_progress)
    print(f"test: {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
