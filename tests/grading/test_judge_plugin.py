"""judge/plugin.py: what the notebook lanes require of the judge's verdicts (the lanes
themselves run the plugin: make test-solutions, make test-notebooks, make test-torch-min)."""

from course_utils.grading.judge import plugin as judge_plugin
from course_utils.paths import REPO_ROOT


def passed(ex_id, held=0, held_passed=0):
    line = {"exercise": ex_id, "verdict": "passed", "message": "fine"}
    return {**line, "held_out": held, "held_out_passed": held_passed} if held else line


def test_the_solutions_lane_wants_every_exercise_passed_held_out_cases_too():
    everything = {i: passed(i) for i in ("01.1", "01.2", "01.3")} | {"01.4": passed("01.4", 3, 3)}
    assert judge_plugin.unmet("pass", {"01"}, everything) == []
    short = {**everything, "01.4": passed("01.4", 3, 2)}
    assert judge_plugin.unmet("pass", {"01"}, short) == [
        "01.4 did not earn its point: 2/3 held-out cases passed"
    ]
    missing = {k: v for k, v in everything.items() if k != "01.2"}
    assert judge_plugin.unmet("pass", {"01"}, missing) == [
        "01.2 did not earn its point: no verdict"
    ]


def test_the_student_lane_wants_no_exercise_passed():
    stubs = {
        i: {"exercise": i, "verdict": "not attempted yet", "message": "stub"}
        for i in ("01.1", "01.2", "01.3", "01.4")
    }
    assert judge_plugin.unmet("none", {"01"}, stubs) == []
    assert judge_plugin.unmet("none", {"01"}, {**stubs, "01.3": passed("01.3")}) == [
        "01.3 earned its point in a notebook that should earn none"
    ]


def test_the_student_lane_wants_every_run_exercise_not_attempted():
    stubs = {
        i: {"exercise": i, "verdict": "not attempted yet", "message": "stub"}
        for i in ("01.1", "01.2", "01.3", "01.4")
    }
    failed = {"exercise": "01.1", "verdict": "failed", "message": "expected a run, got none"}
    assert judge_plugin.unmet("none", {"01"}, {**stubs, "01.1": failed}, runs={"01.1"}) == [
        "01.1 is a run, without one it says: failed: expected a run, got none"
    ]
    # a "code" exercise may fail a stub's answer in its own words
    assert judge_plugin.unmet("none", {"01"}, {**stubs, "01.1": failed}, runs={"01.2"}) == []


def test_run_exercises_are_read_from_the_notebooks_metadata():
    runs = judge_plugin.run_exercises(
        REPO_ROOT / "notebooks" / "05_distributed_data_parallel.ipynb"
    )
    assert runs == {"05.1", "05.3"}
