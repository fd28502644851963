"""Lesson 10's staging step: stage the data set once per node, then time reading it.

    srun python -m course_utils.jobs.lab_staging --data runs/10/data --out runs/10/staging \
        [--answer stage_dataset_yours.py --digest HEX]
    (slurm/lab_staging.sh: 2 nodes x 2 tasks; locally 2 emulated nodes: lab.stage_and_measure)

Every rank stages <data>/images.tar onto the node's local disk: with the learner's
`stage_dataset(archive, environ)` from --answer (exercise 10.1: called with the job's variables,
`staging.job_environ`), else with the course's `staging.stage`. An audit hook counts whether
this rank read the archive; the copy's digest (`staging.content_digest`) says whether it is
whole. Then local rank 0 of each node times four reads of the same images: the small files and
the archive, each from the shared folder and from the local copy. Each rank writes what it did
to <out>/rank<R>.json; the last rank of a node removes the node's copy (only a copy in a folder
of this job's, under the node-local base: a wrong answer's folder is left alone). Torch-free.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from course_utils.files import atomic_write_text
from course_utils.lab import staging
from course_utils.lab.staging import ARCHIVE, IMAGES
from course_utils.ranks import DistEnv, node_name


def say(line: str) -> None:
    sys.stdout.write(line + "\n")  # one write per line: ranks share the node's stdout
    sys.stdout.flush()


def readings(data: Path, copy: Path) -> dict:
    """Four reads of the data set: small files and one archive, shared folder and local disk."""
    # beside the copy, not in it: the node's other ranks read the copy meanwhile
    local_archive = copy.with_name(f"{copy.name}-{ARCHIVE}")
    shutil.copyfile(data / ARCHIVE, local_archive)  # for the fourth read only
    try:
        measured = {
            "shared files": staging.read_files(data / IMAGES),
            "shared archive": staging.read_archive(data / ARCHIVE),
            "local files": staging.read_files(copy / IMAGES),
            "local archive": staging.read_archive(local_archive),
        }
    finally:
        local_archive.unlink()
    return {
        name: {"files": r.files, "bytes": r.nbytes, "seconds": r.seconds}
        for name, r in measured.items()
    }


def with_answer(path: Path, archive: Path, environ: dict) -> tuple[dict, Path | None]:
    """Stage with the learner's function: what it did, and the folder it returned."""
    spec = importlib.util.spec_from_file_location("stage_dataset_yours", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reads = staging.watch_reads(archive)
    start = time.perf_counter()
    try:
        returned = module.stage_dataset(archive, environ)
    except Exception as e:  # the learner's error, in the rank's result
        return {"error": f"{type(e).__name__}: {e}"[:300], "copied": bool(reads)}, None
    copy = Path(returned) if isinstance(returned, (str, os.PathLike)) else None
    found = copy is not None and copy.is_dir()
    return {
        "path": str(returned),
        "copied": bool(reads),
        "seconds": time.perf_counter() - start,
        "base": str(staging.local_base(environ).path),
        "base_from": staging.local_base(environ).source,
        "files": len(list((copy / IMAGES).glob("*"))) if found else 0,
    }, (copy if found else None)


def with_course(archive: Path) -> tuple[dict, Path]:
    staged = staging.stage(archive)
    return staged.as_dict(), staged.path


def ours_to_remove(copy: Path, environ: dict) -> bool:
    """Only a folder of this job's under the node-local base: the job's id, as a whole number,
    in a folder name below the base. A match anywhere in the path would remove job 277's
    folder for job 77, or anything under a base whose own path holds the id."""
    base, copy = staging.local_base(environ).path.resolve(), copy.resolve()
    job = environ.get("SLURM_JOB_ID", "")
    if copy == base or not copy.is_relative_to(base):
        return False
    return any(names_job(part, job) for part in copy.relative_to(base).parts)


def names_job(name: str, job: str) -> bool:
    """The job's id as a whole number in a folder's name: job 77 in lab-77, not in lab-177."""
    return bool(job) and re.search(rf"(?<!\d){re.escape(job)}(?!\d)", name) is not None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True, help=f"folder holding {ARCHIVE}")
    p.add_argument("--out", type=Path, required=True, help="where each rank writes its result")
    p.add_argument("--answer", type=Path, help="a module defining stage_dataset(archive, environ)")
    p.add_argument("--digest", default=None, help="the digest of that function's source")
    args = p.parse_args(argv)
    env, environ = DistEnv.from_environ(), staging.job_environ(os.environ)
    archive = (args.data / ARCHIVE).resolve()
    if args.answer:
        did, copy = with_answer(args.answer, archive, environ)
    else:
        did, copy = with_course(archive)
    result = {
        "rank": env.rank,
        "local_rank": env.local_rank,
        "world_size": env.world_size,
        "ranks_on_node": env.local_world_size,
        "node": node_name(os.environ),
        "job": environ["SLURM_JOB_ID"],  # the learner's job reads its own results back
        "answer": args.digest,
        **did,
        "digest": staging.content_digest(copy / IMAGES) if copy else None,
    }
    how = "copied" if result.get("copied") else "reused"
    say(f"rank {env.rank} on {result['node']}: {how} {result.get('files', 0)} files in {copy}")
    if env.local_rank == 0 and copy is not None:
        result["readings"] = readings(args.data, copy)
    atomic_write_text(args.out / f"rank{env.rank}.json", json.dumps(result, indent=2) + "\n")
    if copy is not None and (not args.answer or ours_to_remove(copy, environ)):
        leave(copy, result["node"], environ, env.local_world_size)
    return 0


def leave(copy: Path, node: str, environ: dict, ranks_on_node: int) -> None:
    """The node's last rank removes the copy, and the job's folder once it holds only locks."""
    staged = staging.Staged(copy, node, staging.local_base(environ), False, 0.0, 0, 0)
    parent, job = copy.parent, environ.get("SLURM_JOB_ID", "")
    if not staging.release(staged, ranks_on_node) or not parent.is_dir():
        return
    if names_job(parent.name, job) and parent.resolve() != staged.base.path.resolve():
        if all(p.name.endswith(".lock") for p in parent.iterdir()):
            shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
