"""DataLoader workers that each copy a data set, or share it: out of memory in a job (lesson 09).

    python -m course_utils.jobs.loader_memory --workers 4 --open copy
    sbatch --mem=1G slurm/loader_oom.sh --open copy      killed by the cgroup's OOM killer
    sbatch --mem=1G slurm/loader_oom.sh --open mmap      the same job, fits

Writes --mib MiB of images to --data (unless the file is there), then reads --batches batches
with --workers DataLoader workers. Every worker opens the file on its first item
(course_utils.failing.job_memory.ImageFile): `--open copy` reads it into the worker's own memory
(a copy per worker), `--open mmap` maps it (the page cache's pages, shared by every worker).
Each process says who it is as it opens the file; then the main process prints what it and its
workers hold (each shared page once), the limit the job's cgroup enforces, and a checksum of what
it read.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from torch.utils.data import DataLoader

from course_utils.distributed import print_line as say  # one write per line: workers share stdout
from course_utils.failing import job_memory
from course_utils.failing.job_memory import MiB
from course_utils.job_config import option, parse, shared


@dataclass(kw_only=True)
class Options:
    data: str = option("runs/09/images.npy", "the .npy file of images")
    mib: int = option(256, "its size, when it has to be written", minimum=1)
    workers: int = option(4, "DataLoader workers (this program is about workers)", minimum=1)
    open: str = option(
        "copy",
        "copy: each worker reads the file into memory; mmap: maps it",
        choices=["copy", "mmap"],
    )
    batch_size: int = shared("batch_size", 256)
    batches: int = option(0, "batches to read (0: 2 per worker)", minimum=0)


def parse_args(argv=None) -> Options:
    return parse(Options, argv, __doc__)


def limit_line() -> str:
    limit = job_memory.memory_limit()
    if limit is None:
        return "memory limit: none found (not in a job with --mem, or not enforced here)"
    return f"memory limit of this job step (its cgroup): {limit / MiB:.0f} MiB"


def announce_worker(worker_id: int) -> None:
    """worker_init_fn: each worker says its pid, so a pid in the kernel's log has a name."""
    say(f"worker {worker_id} (pid {os.getpid()}): started")


def main(argv=None) -> int:
    args = parse_args(argv)
    path = Path(args.data)
    if not path.is_file():
        job_memory.write_images(path, args.mib)
    dataset = job_memory.ImageFile(path, mmap=args.open == "mmap", announce=True)
    size = len(dataset) * job_memory.IMAGE_BYTES / MiB
    workers = f"{args.workers} DataLoader worker{'s' if args.workers != 1 else ''}"
    say(
        f"main process (pid {os.getpid()}): {workers} read {path.name}, "
        f"{size:.0f} MiB of images, each opening it with --open {args.open}"
    )
    say(limit_line())
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        num_workers=args.workers,
        worker_init_fn=announce_worker,
    )
    run = job_memory.read_loader(loader, args.batches or 2 * args.workers)
    say(
        f"held by the main process and its workers, each shared page once: "
        f"{sum(p.held for p in run.held) / MiB:.0f} MiB; each worker's own: "
        f"{', '.join(f'{p.unshared / MiB:.0f}' for p in run.workers)} MiB"
    )
    say(f"finished: {run.batches} batches, checksum {run.checksum}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
