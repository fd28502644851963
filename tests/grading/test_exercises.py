import pytest

from course_utils.grading import CheckFailed, check, exercise, expect, parse_verdicts, run_check
from course_utils.grading import exercises as grading


@pytest.fixture
def scratch_exercise():
    """Register a throwaway exercise 99.1 and remove it afterwards."""

    @exercise("99.1", "double a number")
    def _check(double):
        got = grading.call_answer(double, 21)
        expect(got == 42, 42, got, "double(21)")
        return "doubles"

    yield "99.1"
    grading._REGISTRY.pop("99.1", None)
    grading._SESSION.pop("99.1", None)


def test_passed_line(scratch_exercise, capsys):
    check(scratch_exercise, lambda x: 2 * x)
    assert capsys.readouterr().out == "[99.1] passed: doubles\n"


def test_failed_shows_expected_and_got(scratch_exercise):
    result = run_check(scratch_exercise, lambda x: x + 2)
    assert result.verdict == "failed"
    assert result.message == "double(21): expected 42, got 23"


def test_stub_is_not_attempted(scratch_exercise):
    def stub(x):
        raise NotImplementedError("Exercise 99.1: double a number")

    assert run_check(scratch_exercise, stub).verdict == "not attempted yet"


def test_learner_exception_is_reported_not_raised(scratch_exercise):
    result = run_check(scratch_exercise, lambda x: x / 0)
    assert result.verdict == "failed"
    assert "ZeroDivisionError" in result.message


def test_non_callable_answer(scratch_exercise):
    result = run_check(scratch_exercise, 42)
    assert result.message == "expected a function, got int"


def test_unknown_id_lists_known_ones(capsys):
    check("98.7", None)
    out = capsys.readouterr().out
    assert out.startswith("[98.7] failed: unknown exercise id; known ids: 00.1")


def test_exercise_id_is_validated():
    with pytest.raises(ValueError, match="must look like 'NN.k'"):
        exercise("1.2", "bad id")


def test_duplicate_id_is_refused(scratch_exercise):
    with pytest.raises(ValueError, match="registered twice"):
        exercise(scratch_exercise, "again")(lambda: None)


def test_parse_verdicts_reads_last_line_per_id():
    text = (
        "noise\n[01.1] failed: x\n[01.2] passed: y\n[01.1] passed: z\n[01.3] not attempted yet: w"
    )
    assert parse_verdicts(text) == {"01.1": "passed", "01.2": "passed", "01.3": "not attempted yet"}


def test_summary_counts_this_session(scratch_exercise, capsys, monkeypatch):
    monkeypatch.setattr(
        grading, "lesson_exercises", lambda lesson: [grading._REGISTRY[scratch_exercise]]
    )
    check(scratch_exercise, lambda x: 2 * x)
    grading.summary("99")
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "lesson 99: 1/1 exercises passing"
    assert out[2] == "  99.1 double a number: passed"


def test_every_lesson_has_at_least_three_exercises():
    lessons = {ex_id[:2] for ex_id in grading.registry()}
    for lesson in lessons:
        assert len(grading.lesson_exercises(lesson)) >= 3, lesson


def test_check_failed_message():
    with pytest.raises(CheckFailed, match="^what: expected 1, got 2$"):
        expect(False, 1, 2, "what")


def test_every_checker_module_loads():
    from course_utils.grading import exercises

    exercises.registry()
    assert exercises.LOAD_ERRORS == {}


def test_a_checker_module_that_does_not_load_costs_only_its_lesson(monkeypatch):
    from course_utils.grading import exercises

    monkeypatch.setitem(exercises.LOAD_ERRORS, "lesson42", "SyntaxError: invalid syntax")
    result = exercises.run_check("42.1", lambda: None)
    assert result.message == "not graded: its checker did not load (SyntaxError: invalid syntax)"
    assert exercises.run_check("01.4", lambda x: 3 * x**2 + 2).passed


def test_the_catalog_reads_what_the_checkers_register():
    """catalog.py reads the checker modules without importing them (the grader and the release
    stay torch-free); what it reads is what importing them registers."""
    from course_utils.grading.catalog import catalog

    registered = grading.registry()
    assert list(catalog()) == list(registered)
    for ex_id, entry in catalog().items():
        ex = registered[ex_id]
        declared = (entry.title, entry.points, entry.allows, entry.reference, entry.held_out)
        assert declared == (
            ex.title,
            ex.points,
            ex.allows,
            ex.reference,
            grading.held_out_cases(ex_id),
        )
