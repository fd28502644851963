"""From the judge's verdicts and a run's records to grades: the rules that give points.

An exercise earns its points when the judge (grading/judge/, outside the learner's reach)
passed it AND its check cell ran with outputs equal to the reference's (`compare_checks`, by
nbval's rules, outside the sandbox): what the run printed or wrote never earns a point; a check
cell whose output differs loses it (`exercise_grade`). Where the exercise has held-out cases,
the judge must have run them all and all must pass (`with_held_out`). The submission as a
whole gets a status (`_status`): ok, or why the run ended early (its time limit, a cell's, a
dead kernel, nothing ran); the points of the checks that ran before stay.
"""

from __future__ import annotations

from dataclasses import replace

from course_utils.grading.exercises import FAILED, NOT_ATTEMPTED, PASSED, Result
from course_utils.grading.grader.gradebook import CRASHED, ERROR, OK, TIMEOUT, ExerciseGrade
from course_utils.grading.grader.plan import GradingPlan, Lesson
from course_utils.grading.runner import outputs
from course_utils.grading.runner.limits import Limits
from course_utils.grading.runner.nbval_runner import Run
from course_utils.processes import exit_description


def compare_checks(plan: GradingPlan, lesson: Lesson, run: Run, rules: dict[str, str]) -> None:
    """Mark each check cell's record not ok when its outputs differ from the reference's.

    This is the comparison nbval made inside the run when the notebook carried the reference
    outputs; made here, the reference never enters the sandbox.
    """
    for ex_id, (_, check_cell) in plan.cells.items():
        record = run.records.get(check_cell)
        if record is None or not record["ok"]:
            continue
        if outputs.difference(record.get("outputs", []), lesson.reference[ex_id], rules):
            record.update(ok=False, problem="the cell's outputs differ from the reference")


def exercise_grades(
    plan: GradingPlan,
    run: Run,
    judged: dict[str, dict],
    cell_timeout: float,
    titles: dict[str, str],
    held_out: dict[str, int] | None = None,
) -> list[ExerciseGrade]:
    """Every exercise of the plan: the judge's verdict (`judged`: id -> its verdict line),
    held against the run's records of its cells (`titles`: id -> title; `held_out`: id -> its
    held-out cases, for a grade that ran them)."""
    grades = []
    for ex_id, (exercise_cell, check_cell) in plan.cells.items():
        grade = exercise_grade(
            ex_id,
            titles.get(ex_id, ex_id),
            plan.points.get(ex_id, 1),
            run.records.get(exercise_cell),
            run.records.get(check_cell),
            cell_timeout,
            judged.get(ex_id),
        )
        cases = (held_out or {}).get(ex_id, 0)
        grades.append(with_held_out(grade, cases, judged.get(ex_id)) if cases else grade)
    return grades


def with_held_out(grade: ExerciseGrade, cases: int, line: dict | None) -> ExerciseGrade:
    """`grade` once its `cases` held-out cases are counted: a passing exercise keeps its points
    only when the judge ran every case and every case passed (`line`: its verdict line)."""
    if grade.verdict != PASSED:
        return replace(grade, held_out=cases)
    passed = line.get("held_out_passed") if line else None
    if not line or line.get("held_out") != cases or type(passed) is not int:
        return replace(
            grade,
            verdict=FAILED,
            held_out=cases,
            held_out_passed=0,
            message=f"the visible cases passed, but the {cases} held-out cases reported no "
            "result (the check cell must run to its end, unchanged)",
        )
    passed = max(0, min(passed, cases))
    if passed < cases:
        return replace(
            grade,
            verdict=FAILED,
            held_out=cases,
            held_out_passed=passed,
            message=f"the visible cases passed, but {cases - passed} of {cases} held-out cases "
            "failed: compute the result from the inputs (an answer fitted to the visible "
            "cases fails other inputs)",
        )
    return replace(grade, held_out=cases, held_out_passed=cases)


def exercise_grade(
    ex_id: str,
    title: str,
    points: int,
    exercise: dict | None,
    check: dict | None,
    cell_timeout: float,
    judged: dict | None,
) -> ExerciseGrade:
    """The verdict of one exercise: the judge's (`judged`), given that its check cell ran
    (nbval's records of the exercise and check cells). What the cell printed decides nothing;
    it can only cost the points, when it differs from the reference's."""

    def failed(message: str) -> ExerciseGrade:
        return ExerciseGrade(ex_id, title, points, FAILED, message)

    context = ""
    if exercise is not None and not exercise["ok"]:
        context = f" (your exercise cell did not run cleanly: {_cell_problem(exercise)})"
    if check is None:
        return failed("not graded: the notebook stopped before this check ran" + context)
    if check.get("timed_out") and not check.get("died"):  # whatever the judge heard before
        return failed(
            f"the check did not finish within {cell_timeout:g} s (an endless loop?)" + context
        )
    if judged is None:
        return failed(f"the check never reached the judge: {_cell_problem(check)}{context}")
    verdict, message = str(judged.get("verdict")), str(judged.get("message", ""))
    if verdict == PASSED and not check["ok"]:
        printed = Result(ex_id, verdict, message).line()
        extra = check.get("stdout", "").replace(printed, "").strip()
        extra = (extra + "\n" + check.get("stderr", "")).strip()
        return failed(
            "the check passed, but the check cell's output differs from the reference "
            "solution's: your code printed or warned during the check"
            + (f": {outputs.clip(extra, 200)!r}" if extra else "")
        )
    if verdict not in (PASSED, FAILED, NOT_ATTEMPTED):
        return failed(f"the judge gave no verdict ({verdict!r})")
    return ExerciseGrade(ex_id, title, points, verdict, message + context)


def _cell_problem(rec: dict) -> str:
    if rec.get("died"):
        return "the kernel died in it (os._exit, a crash, or out of memory)"
    if rec.get("problem", "").startswith("Kernel dead"):
        return "the kernel had died in an earlier cell"
    if rec.get("ename"):
        return f"it raised {rec['ename']}: {rec['evalue']}"
    return rec.get("problem") or "it failed"


def _status(plan: GradingPlan, run: Run, limits: Limits) -> tuple[str, str]:
    """The submission's status and why: the notebook's time limit, a dead kernel, a cell's time
    limit, nothing run, or a run that ended before its last cell; else ok."""
    numbers = sorted(run.records)
    died = [n for n in numbers if run.records[n].get("died")]
    slow = [n for n in numbers if run.records[n].get("timed_out") and n not in died]
    where = plan.where
    stuck = next((n for n in range(plan.code_cell_count()) if n not in run.records), None)
    if run.timed_out:
        return TIMEOUT, (
            f"the notebook ran past its {limits.timeout:g} s limit"
            + (f" in code cell {stuck}{where(stuck)}" if stuck is not None else "")
        )
    if died:
        return CRASHED, f"the kernel died in code cell {died[0]}{where(died[0])}"
    if slow:
        return TIMEOUT, (
            f"code cell {slow[0]}{where(slow[0])} ran past the {limits.cell_timeout:g} s cell limit"
        )
    if not run.records:
        return ERROR, f"nbval did not run any cell (exit code {run.returncode}); see the log"
    if stuck is not None:  # pytest itself ended early: killed from inside, or out of a limit
        return CRASHED, (
            f"the grading run ended in code cell {stuck}{where(stuck)} "
            f"({exit_description(run.returncode)})"
        )
    return OK, ""
