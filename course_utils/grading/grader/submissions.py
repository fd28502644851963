"""Finding submissions in a folder, and reading one as a notebook (or saying why it cannot be).

Two layouts: one folder per learner (`alice/01_tensors.ipynb`) or flat files named
`<learner>__NN_topic.ipynb`. One notebook per learner and lesson is graded; what is passed over
is said.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.grading.runner.outputs import clip

MAX_SUBMISSION_BYTES = 50 * 2**20  # a notebook larger than this is not read (outputs do not count)
FLATNAME = re.compile(r"^(?P<learner>.+?)__(?P<lesson>\d\d)_[^/]*\.ipynb$")


@dataclass(frozen=True)
class Submission:
    learner: str
    lesson: str
    path: Path


def find_submissions(folder: Path, lesson: str | None = None) -> tuple[list[Submission], list[str]]:
    """Submissions in `folder`, as `<learner>/NN_topic.ipynb` or `<learner>__NN_topic.ipynb`.

    Returns the submissions (one per learner and lesson) and warnings about files passed over.
    """
    if not folder.is_dir():
        raise ValueError(
            f"submissions folder {folder} does not exist; pass the folder that holds "
            "one folder per learner or files named <learner>__NN_topic.ipynb"
        )
    found, skipped = {}, []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            for nb in sorted(entry.glob("[0-9][0-9]_*.ipynb")):
                _add(found, skipped, Submission(entry.name, nb.name[:2], nb))
        elif entry.suffix == ".ipynb":
            m = FLATNAME.match(entry.name)
            if m:
                _add(found, skipped, Submission(m["learner"], m["lesson"], entry))
            else:
                skipped.append(f"skipped {entry}: name it <learner>__NN_topic.ipynb")
    subs = [s for s in found.values() if lesson is None or s.lesson == lesson]
    return sorted(subs, key=lambda s: (s.lesson, s.learner)), skipped


def _add(found: dict, skipped: list, sub: Submission) -> None:
    key = (sub.learner, sub.lesson)
    if key in found:
        skipped.append(
            f"skipped {sub.path}: {found[key].path.name} is graded for "
            f"{sub.learner}, lesson {sub.lesson} (one notebook per lesson)"
        )
    else:
        found[key] = sub


def read_notebook(path: Path, max_bytes: int = MAX_SUBMISSION_BYTES) -> nbformat.NotebookNode:
    """Read a submission as nbformat 4; ValueError says why it cannot be read."""
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(
            f"the file is {size / 2**20:.0f} MB, over the {max_bytes / 2**20:.0f} MB "
            "limit; clear the outputs (Edit > Clear All Outputs) and resubmit"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(path.read_text(encoding="utf-8", errors="replace"), as_version=4)
        [(c.cell_type, c.source, c.get("metadata", {})) for c in nb.cells]
    except Exception as e:  # malformed JSON, not a notebook, a future nbformat...
        raise ValueError(
            f"not a readable notebook ({type(e).__name__}: {clip(str(e), 200)}); "
            "open it in Jupyter, save it, and resubmit"
        ) from e
    return nb
