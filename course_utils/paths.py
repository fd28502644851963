"""Where the course's files are: the package, the repository and its folders. One definition.

The course runs from a checkout (`pip install -e .`), so the repository is the folder above the
package. Commands that take a folder (`course release`, `course check`) look in the current
folder first, so an instructor's copy of solutions/ elsewhere works too.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
REFERENCE_DIR = PACKAGE_DIR / "reference"  # GPU results the lessons show (package data)
SANITIZE_FILE = PACKAGE_DIR / "grading" / "sanitize.cfg"  # nbval's rules for varying outputs


def repo_dir(name: str) -> Path:
    """`name` (solutions, notebooks, cpp, ...) in the current folder, else in the repository."""
    here = Path.cwd() / name
    return here if here.is_dir() else REPO_ROOT / name


def course_file(relative: str) -> Path:
    """A file of the course itself (`slurm/ddp_srun.sh`, `cpp/CMakeLists.txt`), found through the
    installed package, wherever the notebook that asks runs: a hub's copy of notebooks/ in a
    learner's home has no `../slurm`. FileNotFoundError names the fix where the course was
    installed without its folders."""
    path = REPO_ROOT / relative
    if not path.exists():
        raise FileNotFoundError(
            f"{relative} is not in the course at {REPO_ROOT}: course_utils was installed without "
            "the course's folders; install it from a checkout with `pip install -e <checkout>` "
            "(README, 'On a cluster')"
        )
    return path


def commit() -> str:
    """The course's commit: env COURSE_COMMIT (for a copy without .git, such as a GPU node's),
    else the repository's short hash, else "unknown"."""
    if os.environ.get("COURSE_COMMIT"):
        return os.environ["COURSE_COMMIT"]
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"
