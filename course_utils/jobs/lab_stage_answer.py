"""Run a learner's staging function as one rank of a job would (exercise 10.1's check).

    python -m course_utils.jobs.lab_stage_answer ANSWER.py ARCHIVE GO_FILE

The check starts one of these per rank, with the rank's job variables (SLURM_JOB_ID,
SLURMD_NODENAME, SLURM_TMPDIR or TMPDIR ...) in its environment. Each waits for GO_FILE, so
that the ranks of a node call the function at the same moment, then calls
`stage_dataset(ARCHIVE, dict(os.environ))` from ANSWER.py and prints one JSON line: the folder
it returned, how many of the archive's files were there, whole, when it returned, the digest of
what the folder holds (`staging.content_digest`), and whether this process read the archive, as
Python's audit hooks saw it (`staging.watch_reads`: an `open` of the archive, or a command that
names it). Torch-free.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tarfile
import time
from pathlib import Path

from course_utils.lab import staging

# Seconds the first read of the archive takes here, as on a busy shared file system: a rank that
# does not wait for the others is then caught reading it too, however the machine schedules them.
SLOW_FIRST_READ = 0.2


def members(archive: Path) -> dict[str, int]:
    """{name: size} of the archive's files (read before the hook is installed)."""
    with tarfile.open(archive) as tar:
        return {m.name: m.size for m in tar.getmembers() if m.isfile()}


def whole(folder: Path, expected: dict[str, int]) -> int:
    """How many of the expected files are under `folder`, at their full size."""
    found = 0
    for name, size in expected.items():
        path = folder / name
        found += path.is_file() and path.stat().st_size == size
    return found


def main(argv=None) -> int:
    answer, archive, go = (Path(a) for a in (argv or sys.argv[1:]))
    spec = importlib.util.spec_from_file_location("answer", answer)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = members(archive)
    deadline = time.monotonic() + 30
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    seen = staging.watch_reads(archive, SLOW_FIRST_READ)
    try:
        returned = module.stage_dataset(archive, dict(os.environ))
    except NotImplementedError:
        print(json.dumps({"not_attempted": True}), flush=True)
        return 0
    except Exception as e:  # the learner's error, reported to the check
        report = {"error": f"{type(e).__name__}: {e}", "read_archive": bool(seen)}
        print(json.dumps(report), flush=True)
        return 0
    folder = Path(returned) if isinstance(returned, (str, os.PathLike)) else None
    is_dir = bool(folder and folder.is_dir())
    found = whole(folder, expected) if is_dir else 0
    report = {
        "path": str(returned),
        "is_dir": is_dir,
        "whole": found,
        "expected": len(expected),
        "read_archive": bool(seen),
        "digest": staging.content_digest(folder / staging.IMAGES) if is_dir else None,
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
