"""The grading pipeline: a submission's file in, its grade out; many submissions at a time.

One submission goes: read it (an unreadable one is graded 0 with the reason), build its
grading notebook (plan.py), start its judge (judge/beside.py: the checkers, outside the run),
run it in the runner (one temporary folder, the sandbox, the limits) with the judge's socket
as its one door out and its pytest announcing each check cell to the judge, compare its check
cells with the reference, keep the log, then give it a status and each exercise the judge's
verdict (verdicts.py); a knock the judge refused becomes a flag. With a seed (`course grade`
always has one) the judge also runs the checkers' held-out cases. `course check` (learner.py)
calls the same `grade_notebook`, without the sandbox and without a seed, so learners see the
verdicts of the visible cases.

What the isolation gives and what it does not is written in README.md, section "Grading".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat

from course_utils.files import atomic_write_text
from course_utils.grading.catalog import catalog
from course_utils.grading.exercises import FAILED
from course_utils.grading.grader.gradebook import (
    ERROR,
    UNREADABLE,
    ExerciseGrade,
    SubmissionGrade,
    safe_name,
)
from course_utils.grading.grader.plan import GradingPlan, Lesson, build_grading_notebook
from course_utils.grading.grader.submissions import Submission, read_notebook
from course_utils.grading.grader.verdicts import _status, compare_checks, exercise_grades
from course_utils.grading.judge.beside import judge_beside
from course_utils.grading.runner import leftovers, nbval_runner, outputs
from course_utils.grading.runner.limits import Limits


def grade_notebook(
    path: Path,
    lesson: Lesson,
    limits: Limits,
    learner: str = "",
    sanitize: Path | None = None,
    logs: Path | None = None,
    seed: int | None = None,
) -> SubmissionGrade:
    """Grade one notebook file against `lesson`; every outcome becomes a SubmissionGrade.

    `sanitize`: the nbval sanitize file applied to both sides when check cells are compared;
    `logs`: the folder that keeps each run's pytest log; `seed`: the held-out cases' seed
    (None: they do not run, as in `course check`).
    """
    start = time.perf_counter()
    grade = SubmissionGrade(learner or path.stem, lesson.lesson, str(path), seed=seed)
    grade.sandbox = limits.describe()
    try:
        plan = build_grading_notebook(lesson, read_notebook(path))
    except ValueError as e:
        _unreadable(grade, lesson, str(e))
    else:
        _grade_run(grade, plan, lesson, limits, sanitize, logs)
    grade.seconds = time.perf_counter() - start
    return grade


def _unreadable(grade: SubmissionGrade, lesson: Lesson, reason: str) -> None:
    """Every exercise of the lesson failed, not graded: the notebook could not be read."""
    grade.status, grade.reason = UNREADABLE, reason
    plan = build_grading_notebook(lesson, nbformat.v4.new_notebook())
    titles = _titles()
    why = "not graded: the notebook could not be read"
    grade.exercises = [
        ExerciseGrade(ex_id, titles.get(ex_id, ex_id), points, FAILED, why)
        for ex_id, points in plan.points.items()
    ]


def _grade_run(
    grade: SubmissionGrade,
    plan: GradingPlan,
    lesson: Lesson,
    limits: Limits,
    sanitize: Path | None,
    logs: Path | None,
) -> None:
    """Run the plan's notebook beside its judge, compare its checks, keep its log, and grade it
    from the judge's verdicts into `grade`."""
    grade.notes = plan.notes
    name = f"{lesson.lesson}_grading.ipynb"
    with ThreadPoolExecutor(1) as beside_the_run:  # the flags parse cells while the run goes
        flags = beside_the_run.submit(lambda: plan.flags)
        with judge_beside(grade.seed, limits, lessons=[lesson.lesson]) as judge:
            run = nbval_runner.run_notebook(
                plan.notebook,
                name,
                limits,
                sockets=judge.doors(),
                announce=judge.runner_end,
                masked=judge.hidden(),
            )
        # A knock the judge refused: a check no check cell asked for, or a second in its cell.
        refused = [f"{line['refused']}: {line['why']}" for line in judge.verdicts.refused]
        grade.flags = flags.result() + refused
    compare_checks(plan, lesson, run, outputs.sanitize_rules(sanitize))
    if logs is not None:
        atomic_write_text(logs / f"{safe_name(grade.learner)}__{lesson.lesson}.log", run.log)
    grade.status, grade.reason = _status(plan, run, limits)
    known = catalog()
    held_out = (
        {} if grade.seed is None else {i: known[i].held_out for i in plan.cells if i in known}
    )
    grade.exercises = exercise_grades(
        plan, run, judge.verdicts.lines, limits.cell_timeout, _titles(), held_out
    )


def _titles() -> dict[str, str]:
    return {ex_id: ex.title for ex_id, ex in catalog().items()}


def grade_all(
    submissions: list[Submission],
    lessons: dict[str, Lesson],
    limits: Limits,
    jobs: int = 1,
    sanitize: Path | None = None,
    logs: Path | None = None,
    progress: bool = True,
    seed: int | None = None,
    on_grade: Callable[[Submission, SubmissionGrade], None] | None = None,
) -> list[SubmissionGrade]:
    """Grade every submission, `jobs` at a time; one submission's failure never stops the rest.
    `on_grade(submission, grade)` is called as each one is done (a job array keeps it then)."""
    from tqdm import tqdm

    def one(sub: Submission) -> SubmissionGrade:
        try:
            lesson = lessons[sub.lesson]
            grade = grade_notebook(sub.path, lesson, limits, sub.learner, sanitize, logs, seed)
        except Exception as e:  # a grader bug must cost one row, not the whole gradebook
            grade = SubmissionGrade(
                sub.learner,
                sub.lesson,
                str(sub.path),
                ERROR,
                f"the grader failed: {type(e).__name__}: {e}",
                seed=seed,
            )
        if on_grade is not None:
            on_grade(sub, grade)
        return grade

    grades = []
    bar = tqdm(total=len(submissions), desc="grading", unit="notebook", disable=not progress)
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        with bar:
            for future in as_completed([pool.submit(one, s) for s in submissions]):
                grade = future.result()
                grades.append(grade)
                bar.set_postfix_str(
                    f"{grade.learner} {grade.total}/{grade.max_total} {grade.status}"
                )
                bar.update()
    except BaseException:  # Ctrl-C: start nothing more, and leave no kernel behind
        pool.shutdown(wait=False, cancel_futures=True)
        leftovers.kill_running()
        raise
    pool.shutdown()
    return grades
