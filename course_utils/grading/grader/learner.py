"""`course check NN`: grade a learner's lesson notebook as the instructor's `course grade` will.

Both call `pipeline.grade_notebook`, so the verdicts are the same: only the exercise cells of the
notebook count; the check cells come from the release and run on a fresh kernel under nbval.
The learner's check runs unsandboxed: it is their own code, run with their own rights. Held-out
cases run only in the instructor's grade: `course check` says which exercises have them and how
many, never what they are.
"""

from __future__ import annotations

from pathlib import Path

from course_utils.grading.catalog import catalog


def find_notebook(lesson: str, folder: Path) -> Path:
    matches = sorted(folder.glob(f"{lesson}_*.ipynb"))
    if not matches:
        raise ValueError(f"no notebook {lesson}_*.ipynb in {folder}; pass --notebook PATH")
    return matches[0]


def report(grade) -> str:
    """What `course check` prints: the count, each exercise's verdict (and how many held-out
    cases the instructor's grade adds), and notes on the notebook."""
    known = catalog()
    passing = sum(e.verdict == "passed" for e in grade.exercises)
    lines = [
        f"lesson {grade.lesson}: {passing}/{len(grade.exercises)} exercises passing "
        f"({grade.total}/{grade.max_total} points)"
    ]
    if grade.status != "ok":
        lines.append(f"  status {grade.status}: {grade.reason}")
    for e in grade.exercises:
        text = "passed" if e.verdict == "passed" else f"{e.verdict}: {e.message}"
        cases = known[e.exercise_id].held_out if e.exercise_id in known else 0
        if cases:
            text += f" [the instructor's grade also runs {cases} held-out cases]"
        lines.append(f"  {e.exercise_id} {e.title}: {text}")
    lines += [f"  note: {n}" for n in grade.notes]
    return "\n".join(lines)


def check_lesson(lesson: str, notebook: Path | None = None, timeout: float = 600) -> int:
    """Grade the learner's notebook exactly as `course grade` does; exit code 0 when all pass."""
    from course_utils.grading.grader.pipeline import grade_notebook
    from course_utils.grading.grader.plan import Lesson
    from course_utils.grading.runner.limits import default_limits
    from course_utils.paths import SANITIZE_FILE, repo_dir

    if len(lesson) == 1:
        lesson = f"0{lesson}"
    path = notebook or find_notebook(lesson, repo_dir("notebooks"))
    print(
        f"grading {path} as `course grade` does (your exercise cells, the released check "
        "cells, a fresh kernel) ..."
    )
    grade = grade_notebook(
        path,
        Lesson.load(lesson, repo_dir("solutions")),
        default_limits(timeout, jobs=1, sandbox=False),  # your own code: no sandbox needed
        sanitize=SANITIZE_FILE,
    )
    print(report(grade))
    return 0 if grade.exercises and grade.total == grade.max_total else 1
