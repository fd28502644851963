"""Submissions built from a lesson's notebook and graded in the sandbox with `course grade`, as
the tests of hostile and forged-evidence submissions grade them (one grade per test module)."""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import nbformat

from course_utils.cli import main
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT


def notebook_path(lesson: str, folder: str = "notebooks") -> Path:
    """Lesson "06"'s notebook in `folder` (the released one, or "solutions")."""
    return next((REPO_ROOT / folder).glob(f"{lesson}_*.ipynb"))


def with_answers(
    lesson: str, answers: dict[str, str], folder: str = "notebooks"
) -> nbformat.NotebookNode:
    """The lesson's notebook with `answers` (exercise id -> source) in their exercise cells; the
    others as `folder` has them (stubs in the released notebook, answers in the solution)."""
    nb = nbformat.read(notebook_path(lesson, folder), as_version=4)
    for cell in nb.cells:
        meta = course_meta(cell)
        if meta.get("role") == "exercise" and meta.get("exercise") in answers:
            answer = answers[meta["exercise"]].strip()
            cell.source = "\n\n".join([answer, *_job_lists_kept(cell.source, answer)])
    return nb


def _job_lists_kept(released: str, answer: str) -> list[str]:
    """The cell's list of job ids (`DDP_JOBS = []`: the exercise's check cell passes it), kept
    as a learner who writes the functions above it keeps it, unless the answer binds it."""
    return [
        line
        for line in released.splitlines()
        if (name := re.match(r"^([A-Z][A-Z_]*_JOBS) = ", line)) and name[1] not in answer
    ]


def grade(
    root: Path, submissions: dict[str, tuple[str, nbformat.NotebookNode]], *options: str
) -> tuple[dict[str, dict], Path]:
    """Grade learner -> (lesson, notebook) in the sandbox, two at a time; (gradebook rows by
    learner, the output folder). `options` go to `course grade` (a seed, say)."""
    subs, out = root / "subs", root / "out"
    subs.mkdir(parents=True)
    for learner, (lesson, nb) in submissions.items():
        nbformat.write(nb, subs / f"{learner}__{notebook_path(lesson).name}")
    assert main(["grade", str(subs), "--out", str(out), "-j", "2", *options]) == 0
    with open(out / "gradebook.csv", newline="") as f:
        return {row["learner"]: row for row in csv.DictReader(f)}, out


def feedback(out: Path, learner: str) -> str:
    return (out / "feedback" / f"{learner}.md").read_text()


def grade_command(subs: Path, out: Path, *options: str) -> list[str]:
    """`course grade` as a command line of its own process (the tests that kill it or read what
    it prints): `subs` graded into `out`."""
    command = [sys.executable, "-m", "course_utils.cli", "grade", str(subs)]
    return [*command, "--out", str(out), *options]


def grade_lesson(root: Path, lesson: str, submissions: dict[str, dict[str, str]]):
    """Grade learner -> answers (exercise id -> source) of one lesson, each in that lesson's
    released notebook, with `--lesson` (its exercises only); as `grade` returns."""
    learners = {learner: (lesson, with_answers(lesson, a)) for learner, a in submissions.items()}
    return grade(root, learners, "--lesson", lesson)
