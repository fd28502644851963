"""What the checker tests share: the test that held-out cases catch a known-wrong answer, and
sacct's canned records read as they stand (they are final by construction)."""

import pytest

from course_utils import accounting
from course_utils.grading import held_out_cases, run_check
from course_utils.grading.exercises import run_held_out


@pytest.fixture
def held_out_catches():
    """`held_out_catches(id, right, wrong)`: `right` (its visible check is tested beside)
    passes every held-out case of seeds 0-2; `wrong` (hard-coded, or right only by chance on
    the visible cases) passes the visible check too, and fails a held-out case of every one of
    those seeds. Returns the first failure's message."""

    def catches(exercise_id, right, wrong, seeds=range(3)):
        cases = held_out_cases(exercise_id)
        assert cases >= 1, f"{exercise_id} has no held-out cases"
        assert run_check(exercise_id, wrong).passed, "the wrong answer must pass what is visible"
        for seed in seeds:
            assert run_held_out(exercise_id, seed, right).passed == cases, seed
        caught = [run_held_out(exercise_id, seed, wrong) for seed in seeds]
        assert all(r.passed < r.cases for r in caught), caught
        return caught[0].failures[0]

    return catches


@pytest.fixture(autouse=True)
def sacct_records_read_once(monkeypatch):
    """A canned record is not waited for (`accounting.ended_job_steps` waits for the database
    of a real cluster; tests/test_accounting.py tests that wait)."""
    monkeypatch.setattr(accounting, "SETTLE_WAIT", 0)
