"""What `course grade` settles before it grades (`Prepared`) and writes when it is done
(`finish`): the same for a run here (command.py) and across a job array (on_cluster.py), so
both give the same files. Part of the instructor's tooling (README, "Grading"); no lesson
teaches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from course_utils.files import atomic_write_text
from course_utils.grading.catalog import prepares_runs
from course_utils.grading.grader import lms
from course_utils.grading.grader.gradebook import SubmissionGrade, summary_table, write_outputs
from course_utils.grading.grader.plan import Lesson
from course_utils.grading.grader.submissions import Submission
from course_utils.grading.runner.limits import Limits


@dataclass
class Prepared:
    """What `course grade` found and decided before grading anything."""

    subs: list[Submission]
    skipped: list[str]  # files passed over, said on stderr
    lessons: dict[str, Lesson]
    limits: Limits  # as computed here (a task computes its own for its CPUs)
    hidden: list[Path]  # what the sandbox must never show


def prepare_runs(lessons: dict[str, Lesson], limits: Limits) -> list[str]:
    """What the graded lessons' sandboxed runs need made once on this machine before they start
    (a checks module's `prepare_runs`: lesson 07 builds the course's C++ programs); one line
    each of what was done. A job array's tasks find it made by the grader that submitted it.
    A checks module that does not import prepares nothing: its lesson's grades say why."""
    if not limits.sandbox:
        return []
    from course_utils.grading.exercises import checks_module  # the checks import torch

    said = []
    for number in sorted(lessons):
        for name in prepares_runs(number):  # imported only where there is work to do
            prepare = getattr(checks_module(name), "prepare_runs", None)
            if prepare is not None:
                said.append(prepare())
    return said


def finish(args, grades: list[SubmissionGrade]) -> None:
    """Write the gradebook, feedback, JUnit report and the LMS file asked for; print the table
    and where each file is."""
    out = Path(args.out)
    paths = write_outputs(out, grades)
    print(summary_table(grades))
    print(
        f"gradebook {paths['gradebook']}, feedback in {paths['feedback']}/ (Markdown and "
        f"HTML), JUnit report {paths['junit']}, logs in {out / 'logs'}/"
    )
    layout = getattr(args, "lms", None)
    if layout:
        path = atomic_write_text(out / f"{layout}.csv", lms.export(layout, grades))
        print(f"{layout} import file {path} (README, 'Grading': how to import it)")
