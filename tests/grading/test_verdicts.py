"""grader/verdicts: the rules that give points, on the judge's verdicts and on records as
nbval_record writes them.

Lesson 01's grading plan (exercises 01.1-01.4, each an exercise cell and its check cell); no
notebook runs here (tests/integration/test_grader.py grades real submissions end to end).
"""

import nbformat
import pytest
from grading_records import cut_off, dead_before, record, run_of, verdicts_from

from course_utils.grading.exercises import FAILED, NOT_ATTEMPTED, PASSED
from course_utils.grading.grader import gradebook, verdicts
from course_utils.grading.grader.plan import Lesson, build_grading_notebook
from course_utils.grading.runner import outputs
from course_utils.grading.runner.limits import Limits
from course_utils.paths import REPO_ROOT, SANITIZE_FILE

SOLUTIONS = REPO_ROOT / "solutions"
PASS_01_1 = (
    "[01.1] passed: the view shares the batch's 3,145,728 bytes; the copy takes as many again\n"
)


@pytest.fixture(scope="module")
def lesson():
    return Lesson.load("01", SOLUTIONS)


@pytest.fixture(scope="module")
def plan(lesson):
    return build_grading_notebook(lesson, nbformat.read(SOLUTIONS / "01_tensors.ipynb", 4))


def judge(exercise, check, judged="as printed"):
    """The verdict of 01.1; `judged`: the judge's verdict line (by default, an honest kernel's:
    what the check cell printed is what the judge sent it)."""
    if judged == "as printed":
        judged = verdicts_from({"01.1": check["stdout"]}, None).get("01.1") if check else None
    return verdicts.exercise_grade("01.1", "flatten", 2, exercise, check, 10, judged)


def test_a_passed_check_earns_the_points():
    grade = judge(record(5), record(6, PASS_01_1, check="01.1"))
    assert (grade.verdict, grade.points, grade.max_points) == (PASSED, 2, 2)
    assert grade.message == PASS_01_1.removeprefix("[01.1] passed: ").strip()


def test_a_failed_check_earns_nothing_and_says_why():
    got = record(6, "[01.1] failed: expected a view, got a copy\n", check="01.1")
    grade = judge(record(5), got)
    assert (grade.verdict, grade.points, grade.message) == (
        FAILED,
        0,
        "expected a view, got a copy",
    )
    stub = record(6, "[01.1] not attempted yet: replace the stub\n", check="01.1")
    assert judge(record(5), stub).verdict == NOT_ATTEMPTED


def test_a_printed_pass_earns_nothing_when_the_judge_did_not_pass_it():
    """A kernel whose print was replaced, or whose check cell was rewritten by a hook, prints the
    reference's line; the judge, who ran the checker on the answers, failed them."""
    forged = record(6, PASS_01_1, check="01.1")
    line = {"exercise": "01.1", "verdict": FAILED, "message": "expected shape (8, 48)"}
    grade = judge(record(5), forged, line)
    assert (grade.verdict, grade.points, grade.message) == (FAILED, 0, "expected shape (8, 48)")
    unjudged = judge(record(5), forged, None)
    assert unjudged.verdict == FAILED and unjudged.message.startswith(
        "the check never reached the judge"
    )


def test_a_judged_pass_needs_its_check_cell_to_have_run():
    line = {"exercise": "01.1", "verdict": PASSED, "message": "fine"}
    grade = judge(record(5), None, line)
    assert grade.verdict == FAILED
    assert grade.message == "not graded: the notebook stopped before this check ran"


def test_a_check_that_never_ran_is_not_graded():
    grade = judge(record(5), None)
    assert (grade.verdict, grade.points) == (FAILED, 0)
    assert grade.message == "not graded: the notebook stopped before this check ran"
    broken = record(5, raised=("SyntaxError", "invalid syntax"))
    assert judge(broken, None).message == (
        "not graded: the notebook stopped before this check ran (your exercise cell did not "
        "run cleanly: it raised SyntaxError: invalid syntax)"
    )


def test_a_check_past_the_cell_limit_timed_out():
    grade = judge(record(5), cut_off(6))
    assert grade.verdict == FAILED
    assert grade.message == "the check did not finish within 10 s (an endless loop?)"
    # the judge gave up on the kernel first: the cell's limit is still what the learner reads
    gave_up = {"exercise": "01.1", "verdict": FAILED, "message": "the kernel stopped answering"}
    assert judge(record(5), cut_off(6), gave_up).message == grade.message


def test_passed_but_printing_during_the_check_earns_nothing():
    """The check said passed, but the cell's output differs from the reference's (the learner's
    function printed): nbval would fail the cell, so the exercise fails."""
    said = record(6, "debug torch.Size([8])\n" + PASS_01_1, stderr="a warning\n", check="01.1")
    said.update(ok=False, problem="the cell's outputs differ from the reference")
    grade = judge(record(5), said)
    assert grade.verdict == FAILED and grade.points == 0
    assert grade.message.startswith("the check passed, but the check cell's output differs")
    assert "'debug torch.Size([8])\\na warning'" in grade.message
    silent = record(6, PASS_01_1, check="01.1")
    silent.update(ok=False)
    assert grade.message != judge(record(5), silent).message
    assert judge(record(5), silent).message.endswith("printed or warned during the check")


@pytest.mark.parametrize(
    "check, says",
    [
        (record(6, raised=("NameError", "name 'x' is not defined")), "it raised NameError: name"),
        (record(6, died=True), "the kernel died in it (os._exit, a crash, or out of memory)"),
        (dead_before(6), "the kernel had died in an earlier cell"),
        (record(6, problem=RuntimeError("odd")), "the check never reached the judge: odd"),
    ],
)
def test_a_check_without_a_verdict_says_what_happened(check, says):
    grade = judge(record(5), check)
    assert grade.verdict == FAILED and says in grade.message


def test_the_exercise_cell_s_trouble_is_added_to_the_verdict():
    grade = judge(record(5, died=True), dead_before(6))
    assert grade.message == (
        "the check never reached the judge: the kernel had died in an earlier cell (your exercise "
        "cell did not run cleanly: the kernel died in it (os._exit, a crash, or out of memory))"
    )


def test_compare_checks_fails_a_check_whose_output_differs(plan, lesson):
    rules = outputs.sanitize_rules(SANITIZE_FILE)
    (_, check1), (_, check2), (_, check3), (_, check4) = plan.cells.values()
    same = record(check1, PASS_01_1, check="01.1")
    printed = record(
        check2,
        "debug\n[01.2] passed: every column now has mean 0 and standard deviation 1\n",
        check="01.2",
    )
    failing = record(check3, raised=("NameError", "x"), check="01.3")
    run = run_of(same, printed, failing)
    verdicts.compare_checks(plan, lesson, run, rules)
    assert run.records[check1]["ok"] and run.records[check1]["problem"] == ""
    assert not run.records[check2]["ok"]
    assert run.records[check2]["problem"] == "the cell's outputs differ from the reference"
    assert run.records[check3]["problem"] == "Cell execution caused an exception"  # as it was
    assert check4 not in run.records  # a check that did not run is not invented


def test_exercise_grades_judge_every_exercise_of_the_plan(plan):
    (ex1, check1), (ex2, check2) = plan.cells["01.1"], plan.cells["01.2"]
    run = run_of(record(ex1), record(check1, PASS_01_1, check="01.1"), record(ex2), cut_off(check2))
    judged = verdicts_from({"01.1": PASS_01_1}, None)
    grades = verdicts.exercise_grades(plan, run, judged, 10, {"01.1": "flatten"})
    assert [(g.exercise_id, g.title, g.verdict) for g in grades] == [
        ("01.1", "flatten", PASSED),
        ("01.2", "01.2", FAILED),
        ("01.3", "01.3", FAILED),
        ("01.4", "01.4", FAILED),
    ]
    assert "did not finish within 10 s" in grades[1].message
    assert grades[2].message.startswith("not graded")


def everything(plan, but=(), **replaced):
    """Records of every code cell of the plan, ok, but for those left out or replaced."""
    cells = range(plan.code_cell_count())
    return [replaced.get(f"c{n}", record(n)) for n in cells if n not in but]


LIMITS = Limits(timeout=60, cell_timeout=10)


def test_status_ok_when_every_cell_ran(plan):
    assert verdicts._status(plan, run_of(*everything(plan)), LIMITS) == (gradebook.OK, "")


def test_status_timeout_names_the_cell_the_notebook_limit_cut(plan):
    check2 = plan.cells["01.2"][1]
    run = run_of(*everything(plan, but=range(check2, 60)), timed_out=True)
    assert verdicts._status(plan, run, LIMITS) == (
        gradebook.TIMEOUT,
        f"the notebook ran past its 60 s limit in code cell {check2} (check of 01.2)",
    )


def test_status_crashed_where_the_kernel_died(plan):
    check3 = plan.cells["01.3"][1]
    after = {f"c{check3}": record(check3, died=True), f"c{check3 + 1}": dead_before(check3 + 1)}
    run = run_of(*everything(plan, **after))
    assert verdicts._status(plan, run, LIMITS) == (
        gradebook.CRASHED,
        f"the kernel died in code cell {check3} (check of 01.3)",
    )


def test_status_timeout_for_a_cell_past_its_limit(plan):
    ex2 = plan.cells["01.2"][0]
    run = run_of(*everything(plan, **{f"c{ex2}": cut_off(ex2)}))
    assert verdicts._status(plan, run, LIMITS) == (
        gradebook.TIMEOUT,
        f"code cell {ex2} (exercise 01.2) ran past the 10 s cell limit",
    )


def test_status_error_when_nothing_ran(plan):
    assert verdicts._status(plan, run_of(returncode=4), LIMITS) == (
        gradebook.ERROR,
        "nbval did not run any cell (exit code 4); see the log",
    )


def test_status_crashed_when_the_run_ended_early(plan):
    """pytest itself ended before the last cell (a submission killed it, or a limit did)."""
    last = plan.code_cell_count() - 1
    ex4 = plan.cells["01.4"][0]
    run = run_of(*everything(plan, but=range(ex4, last + 1)), returncode=-9)
    assert verdicts._status(plan, run, LIMITS) == (
        gradebook.CRASHED,
        f"the grading run ended in code cell {ex4} (exercise 01.4) (signal 9 (SIGKILL))",
    )
    run = run_of(*everything(plan, but=[last]), returncode=1)
    status, reason = verdicts._status(plan, run, LIMITS)
    assert status == gradebook.CRASHED and reason.endswith(f"cell {last} (exit code 1)")
