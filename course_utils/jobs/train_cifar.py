"""Train the lesson CNN on CIFAR-10 on one device: the script lesson 02 builds, as a module.

    python -m course_utils.jobs.train_cifar --epochs 2            # GPU if there is one, else CPU
    python -m course_utils.jobs.train_cifar --disable-cuda        # force the CPU
    srun python -m course_utils.jobs.train_cifar --threads $SLURM_CPUS_PER_TASK

It follows the general steps of the cluster documentation: read the data; scale, split, convert to
tensors and load; design the network; define loss and optimizer; train; apply to the test set;
display the results.
"""

from __future__ import annotations

import argparse
import sys

import torch

from course_utils import data, hpc, models, train
from course_utils.device import local_device
from course_utils.ranks import DistEnv, batch_script_warning


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument(
        "--num-workers", type=int, default=None,
        help="DataLoader workers (default: one per allocated CPU on a GPU, none on the CPU)",
    )  # fmt: skip
    p.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: allocated CPUs)"
    )
    p.add_argument(
        "--disable-cuda", action="store_true", help="run on the CPU even if a GPU is free"
    )
    p.add_argument(
        "--max-steps", type=int, default=None, help="stop each epoch after this many batches"
    )
    p.add_argument(
        "--data-root", default=None, help="CIFAR-10 folder (default: $COURSE_DATA or ./data)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar (batch jobs)")
    args = p.parse_args(argv)
    if args.epochs < 1:
        p.error(f"--epochs {args.epochs}: train for at least 1 epoch")
    return args


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
