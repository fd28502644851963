"""Lesson 10's staging step: stage the data set once per node, then time reading it.

    srun python -m course_utils.jobs.lab_staging --data runs/10/data --out runs/10/staging
    (slurm/lab_staging.sh: 2 nodes x 2 tasks; locally, one rank: lab.stage_and_measure)

Every rank calls `staging.stage`: the first rank of each node unpacks <data>/images.tar onto
the node's local disk (SLURM_TMPDIR, else TMPDIR, else /tmp), the others wait and use that copy.
Then local rank 0 of each node times four reads of the same images: the small files and the
archive, each from the shared folder and from the local disk. Each rank writes what it did to
<out>/rank<R>.json; the last rank of a node to finish removes the node's copy (a site that
sets SLURM_TMPDIR removes it at the job's end anyway; /tmp would keep it). Torch-free: it
starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from course_utils.files import atomic_write_text
from course_utils.lab import staging
from course_utils.lab.staging import ARCHIVE, IMAGES
from course_utils.ranks import DistEnv


def say(line: str) -> None:
    sys.stdout.write(line + "\n")  # one write per line: ranks share the node's stdout
    sys.stdout.flush()


def readings(data: Path, staged: staging.Staged) -> dict:
    """Four reads of the data set: small files and one archive, shared folder and local disk."""
    # beside the copy, not in it: the node's other ranks count the copy's files meanwhile
    local_archive = staged.path.with_name(f"{staged.path.name}-{ARCHIVE}")
    shutil.copyfile(data / ARCHIVE, local_archive)  # for the fourth read only
    try:
        measured = {
            "shared files": staging.read_files(data / IMAGES),
            "shared archive": staging.read_archive(data / ARCHIVE),
            "local files": staging.read_files(staged.path / IMAGES),
            "local archive": staging.read_archive(local_archive),
        }
    finally:
        local_archive.unlink()
    return {
        name: {"files": r.files, "bytes": r.nbytes, "seconds": r.seconds}
        for name, r in measured.items()
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True, help=f"folder holding {ARCHIVE}")
    p.add_argument("--out", type=Path, required=True, help="where each rank writes its result")
    args = p.parse_args(argv)
    env = DistEnv.from_environ()
    staged = staging.stage(args.data / ARCHIVE)
    result = {
        "rank": env.rank,
        "local_rank": env.local_rank,
        "world_size": env.world_size,
        "ranks_on_node": env.local_world_size,
        **staged.as_dict(),
    }
    say(
        f"rank {env.rank} on {staged.node}: {'copied' if staged.copied else 'reused'} "
        f"{staged.files} files under {staged.base} in {staged.seconds:.3f} s"
    )
    if env.local_rank == 0:
        result["readings"] = readings(args.data, staged)
    atomic_write_text(args.out / f"rank{env.rank}.json", json.dumps(result, indent=2) + "\n")
    staging.release(staged, env.local_world_size)  # the node's last rank removes the copy
    return 0


if __name__ == "__main__":
    sys.exit(main())
