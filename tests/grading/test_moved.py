"""The old module paths of the grading tooling still give the very objects the rooms define
(instructors' scripts and checks written before the split keep working; _moved.py)."""

import importlib

import pytest

OLD_PATHS = {
    "course_utils.grading.grader": {
        "find_submissions": "grader.submissions",
        "read_notebook": "grader.submissions",
        "limits_from_args": "grader.command",
        "grade_main": "grader.command",
        "grade_notebook": "grader.pipeline",
        "Lesson": "grader.plan",
        "FRESH_CHECK": "grader.plan",
        "judge": "grader.verdicts",
        "_status": "grader.verdicts",
        "default_limits": "runner.limits",
        "run_nbval": "runner.nbval_runner",
        "kill_running": "runner.leftovers",
    },
    "course_utils.grading.sandbox": {
        "Layout": "runner.sandbox",
        "bwrap_command": "runner.sandbox",
        "problem": "runner.sandbox",
        "BWRAP_ENV": "runner.sandbox",
        "process_cap": "runner.cgroups",
        "process_cap_kind": "runner.cgroups",
        "MiB": "runner.limits",
        "parse_size": "runner.limits",
    },
    "course_utils.grading.nbval_runner": {
        "Limits": "runner.limits",
        "Run": "runner.nbval_runner",
        "run_nbval": "runner.nbval_runner",
        "kill_running": "runner.leftovers",
    },
    "course_utils.grading.gradebook": {
        "ExerciseGrade": "grader.gradebook",
        "SubmissionGrade": "grader.gradebook",
        "write_outputs": "grader.gradebook",
        "clip": "runner.outputs",
    },
    "course_utils.grading.learner": {"report": "grader.learner", "check_lesson": "grader.learner"},
    "course_utils.grading.kernel_watch": {
        "pytest_configure": "runner.kernel_watch",
        "watch": "runner.kernel_watch",
    },
}
CASES = [(old, name, new) for old, names in OLD_PATHS.items() for name, new in names.items()]


@pytest.mark.parametrize("old, name, new", CASES, ids=[f"{o}.{n}" for o, n, _ in CASES])
def test_an_old_path_gives_the_room_s_own_object(old, name, new):
    room = importlib.import_module(f"course_utils.grading.{new}")
    assert getattr(importlib.import_module(old), name) is getattr(room, name)


def test_an_unknown_name_says_where_the_module_went():
    from course_utils.grading import sandbox

    with pytest.raises(AttributeError, match=r"has no attribute 'nothing' \(it moved to"):
        sandbox.nothing  # noqa: B018


def test_the_old_kernel_watch_path_is_still_a_pytest_plugin():
    """pytest finds hooks by listing the module: the hook itself must be there."""
    module = importlib.import_module("course_utils.grading.kernel_watch")
    assert "pytest_configure" in dir(module)
