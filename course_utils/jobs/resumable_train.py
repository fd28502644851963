"""A training program that survives time limits, node failures and preemption (lesson 06).

    python -m course_utils.jobs.resumable_train --ckpt-dir runs/ckpt --epochs 2 --max-steps 40

Run it again with the same arguments after any interruption (kill -9, scancel, a requeue) and it
continues from the newest usable checkpoint in --ckpt-dir, bitwise exactly on the CPU (see
course_utils/resumable.py). SIGUSR1 or SIGTERM make it save, requeue the job under Slurm and exit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course_utils.resumable import Config, train


def parse_args(argv=None) -> Config:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Config(ckpt_dir="")
    p.add_argument("--ckpt-dir", required=True, help="folder for checkpoints (created if missing)")
    p.add_argument("--epochs", type=int, default=defaults.epochs)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in all")
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--dataset-size", type=int, default=defaults.dataset_size)
    p.add_argument("--lr", type=float, default=defaults.lr)
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument(
        "--save-every", type=int, default=defaults.save_every, help="steps between saves"
    )
    p.add_argument("--keep-last", type=int, default=defaults.keep_last, help="checkpoints kept")
    p.add_argument(
        "--threads",
        type=int,
        default=defaults.threads,
        help="torch threads; keep it equal between a run and its resume",
    )
    p.add_argument(
        "--step-delay", type=float, default=0.0, help="seconds to sleep per step (demos)"
    )
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "dataset_size", "save_every", "keep_last", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    return Config(**vars(args))


def main(argv=None) -> int:
    config = parse_args(argv)
    Path(config.ckpt_dir).mkdir(parents=True, exist_ok=True)
    train(config, log=lambda msg: print(msg, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
