"""Where the course's files are: the package, the repository and its folders. One definition.

The course runs from a checkout (`pip install -e .`), so the repository is the folder above the
package. Commands that take a folder (`course release`, `course check`) look in the current
folder first, so an instructor's copy of solutions/ elsewhere works too.
No lesson teaches it: it is the course's plumbing. Lessons see its `commit` in the labels of
reference results (lessons 03, 04 and 08).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from course_utils import processes

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
REFERENCE_DIR = PACKAGE_DIR / "reference"  # GPU results the lessons show (package data)
SANITIZE_FILE = PACKAGE_DIR / "grading" / "sanitize.cfg"  # nbval's rules for varying outputs


def repo_dir(name: str) -> Path:
    """`name` (solutions, notebooks, cpp, ...) in the current folder, else in the repository."""
    here = Path.cwd() / name
    return here if here.is_dir() else REPO_ROOT / name


def build_root() -> Path:
    """The project's build folder (gitignored): env COURSE_BUILD_DIR, else build/ in the repo.
    C++ programs, compiled packages and the inductor cache live under it."""
    return Path(os.environ.get("COURSE_BUILD_DIR") or REPO_ROOT / "build")


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


def as_learner_sees(text: str, home: str | None = None) -> str:
    """`text` (a log, a traceback) with this machine's paths written as a learner reads them on
    their own copy: the course's files relative to the course folder (`course_utils/jobs/x.py`,
    `.venv/bin/python`), anything else in the home folder as `~/...`. Committed logs and
    outputs then show no folder of the machine that made them."""
    ends = r"[\s'\"),:;]"  # what may follow a path that ends there
    root = re.escape(str(REPO_ROOT))
    shown = re.sub(f"{root}/", "", text)
    shown = re.sub(f"{root}(?={ends}|$)", ".", shown, flags=re.M)
    home = (home if home is not None else os.path.expanduser("~")).rstrip("/")
    if home:
        shown = re.sub(f"{re.escape(home)}(?=/|{ends}|$)", "~", shown, flags=re.M)
    return shown


def shown(path: str | os.PathLike) -> str:
    """`path` as a learner reads it in an output (`as_learner_sees`): relative to the course when
    inside it (`build/cpp`), else under `~` when in the home folder, else as it is."""
    return as_learner_sees(str(Path(path).resolve()))


def commit() -> str:
    """The course's commit: env COURSE_COMMIT (for a copy without .git, such as a GPU node's),
    else the repository's short hash, else "unknown"."""
    if os.environ.get("COURSE_COMMIT"):
        return os.environ["COURSE_COMMIT"]
    try:
        done = processes.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"], timeout=10)
    except OSError:  # no git here
        return "unknown"
    return done.stdout.strip() if done.ok and done.stdout.strip() else "unknown"
