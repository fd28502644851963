"""Held-out cases: drawn from a seed, run only in the instructor's grade (by the judge), silent in
the check cell, and counted in the verdict (no notebook runs here; the judge's own protocol:
tests/grading/test_judge.py)."""

import random
import re

import pytest
import torch

from course_utils.grading import CheckFailed, exercises, held_out, held_out_cases
from course_utils.grading.exercises import HeldOut, run_held_out
from course_utils.grading.grader import gradebook, learner
from course_utils.grading.grader.gradebook import ExerciseGrade, SubmissionGrade
from course_utils.grading.grader.verdicts import with_held_out


def squares_case(rng, square):
    """A case of a made-up exercise: square(n) for a drawn n, noisy on purpose."""
    n = rng.randint(2, 10**6)
    print("drawing", n)  # a checker's own output must not reach the check cell either
    if square(n) != n * n:
        raise CheckFailed(f"square({n}) is wrong")


def square_check(square):
    """The visible case of a made-up exercise: one square."""
    if square(7) != 49:
        raise CheckFailed("square(7) is wrong")
    return "7 squared is 49"


@pytest.fixture
def squares(monkeypatch):
    """01.1 as a made-up exercise, with 3 held-out squares cases, for the length of a test (the
    registry is restored): the real 01.1 measures timings, which this test has no use for."""
    exercises.load_checkers()
    made_up = exercises.Exercise("01.1", "square", 1, square_check)
    monkeypatch.setitem(exercises._REGISTRY, "01.1", made_up)
    monkeypatch.setitem(exercises._HELD_OUT, "01.1", HeldOut("01.1", 3, squares_case))
    return "01.1"


def test_the_same_seed_draws_the_same_cases_and_another_seed_others(squares):
    drawn = []

    def spy(n):
        drawn.append(n)
        return n * n

    for seed in (7, 7, 8):
        assert run_held_out(squares, seed, spy).passed == 3
    assert drawn[:3] == drawn[3:6] and drawn[:3] != drawn[6:]


def test_a_hard_coded_answer_fails_and_the_failures_are_kept(squares):
    result = run_held_out(squares, 1, lambda n: 49)
    assert (result.cases, result.passed) == (3, 0)
    assert re.fullmatch(r"square\(\d+\) is wrong", result.failures[0])
    crashed = run_held_out(squares, 1, lambda n: 1 / 0)
    assert crashed.failures[0] == "your code raised ZeroDivisionError: division by zero"
    assert run_held_out("01.2", 1, lambda n: n) is None  # no held-out cases: nothing runs


def test_held_out_cases_leave_no_output_and_no_trace_in_the_global_generators(squares, capsys):
    random.seed(3)
    torch.manual_seed(3)
    expected = (random.random(), torch.rand(1))
    random.seed(3)
    torch.manual_seed(3)

    def noisy(n):
        print("my debug line")
        random.random()
        torch.rand(5)
        return n * n

    assert run_held_out(squares, 5, noisy).passed == 3
    assert capsys.readouterr() == ("", "")
    assert (random.random(), torch.rand(1)) == expected


def test_registering_held_out_cases_checks_its_arguments():
    with pytest.raises(ValueError, match=r"held_out\('01.1', cases=0\): give at least 1 case"):
        held_out("01.1", cases=0)
    with pytest.raises(ValueError, match="held-out cases of '05.2' are registered twice"):
        held_out("05.2", cases=2)(squares_case)


PASSED = ExerciseGrade("05.2", "plan", 1, "passed", "nccl only with a GPU per rank")


@pytest.mark.parametrize(
    "line, verdict, counted, says",
    [
        (
            {"exercise": "05.2", "verdict": "passed", "held_out": 4, "held_out_passed": 4},
            "passed",
            4,
            "nccl only with a GPU per rank",
        ),
        (
            {"exercise": "05.2", "verdict": "passed", "held_out": 4, "held_out_passed": 1},
            "failed",
            1,
            "the visible cases passed, but 3 of 4 held-out cases failed: compute the result",
        ),
        (None, "failed", 0, "the 4 held-out cases reported no result"),
        (
            {"exercise": "05.2", "verdict": "passed", "held_out": 9, "held_out_passed": 9},
            "failed",
            0,
            "reported no result",
        ),  # not the instructor's count: not this grade's judge
    ],
)
def test_a_passing_exercise_keeps_its_points_only_when_every_held_out_case_passed(
    line, verdict, counted, says
):
    grade = with_held_out(PASSED, 4, line)
    assert (grade.verdict, grade.held_out, grade.held_out_passed) == (verdict, 4, counted)
    assert says in grade.message


def test_a_failed_exercise_says_its_held_out_cases_did_not_run():
    failed = ExerciseGrade("05.2", "plan", 1, "failed", "expected nccl")
    grade = with_held_out(failed, 4, None)
    assert (grade.verdict, grade.message, grade.held_out_passed) == (
        "failed",
        "expected nccl",
        None,
    )
    assert grade.held_out_text() == (
        "4 held-out cases, not run (the visible cases must pass first)"
    )


def test_feedback_says_how_many_held_out_cases_passed():
    grade = SubmissionGrade(
        "ann",
        "05",
        "ann/05.ipynb",
        exercises=[with_held_out(PASSED, 4, {"held_out": 4, "held_out_passed": 3})],
    )
    assert "(3/4 held-out cases passed)" in gradebook.feedback_markdown("ann", [grade])
    assert "<td>3/4 held-out cases passed</td>" in gradebook.feedback_html("ann", [grade])


def test_course_check_says_that_held_out_cases_exist_and_how_many_not_what_they_are():
    grade = SubmissionGrade("me", "05", "05.ipynb", exercises=[PASSED])
    text = learner.report(grade)
    assert held_out_cases("05.2") == 4
    assert "05.2 plan: passed [the instructor's grade also runs 4 held-out cases]" in text
