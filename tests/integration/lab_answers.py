"""Lesson 10's reference answers, taken from the solution notebook's exercise cells, as a module
of their own (so that 10.1's check and the lesson's staging job read a function's source, as they
do in a notebook): the cells whole, as a kernel runs them (they define the answers and the lists
of job ids, and run nothing), so that each function's source, and its digest, is the cell's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT

NOTEBOOK = REPO_ROOT / "solutions" / "10_cluster_lab.ipynb"
# What the notebook's first cell imports and the exercise cells use.
PRELUDE = "import re\nfrom pathlib import Path\n\n"


def load(folder: Path):
    """A module holding stage_dataset, scaling_script, diagnose_transport and decide."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cells = [c.source for c in nb.cells if course_meta(c).get("role") == "exercise"]
    path = folder / "lab_answers_10.py"
    path.write_text(PRELUDE + "\n\n\n".join(cells) + "\n")
    spec = importlib.util.spec_from_file_location("lab_answers_10", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
