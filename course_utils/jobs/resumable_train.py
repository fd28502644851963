"""A training program that survives time limits, node failures and preemption (lesson 06).

    python -m course_utils.jobs.resumable_train --ckpt-dir runs/ckpt --epochs 2 --max-steps 40

Run it again with the same arguments after any interruption (kill -9, scancel, a requeue) and it
continues from the newest usable checkpoint in --ckpt-dir, bitwise exactly on the CPU (see
course_utils/fault_tolerance/resumable.py). SIGUSR1 or SIGTERM make it save, requeue the job
under Slurm and exit.
"""

from __future__ import annotations

import sys
from pathlib import Path

from course_utils.fault_tolerance.resumable import Config, train
from course_utils.job_config import parse


def parse_args(argv=None) -> Config:
    return parse(Config, argv, __doc__)


def main(argv=None) -> int:
    config = parse_args(argv)
    Path(config.ckpt_dir).mkdir(parents=True, exist_ok=True)
    train(config, log=lambda msg: print(msg, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
