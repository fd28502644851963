"""launching: what run_programs refuses before it starts anything (the runs: tests/integration)."""

import pytest

from course_utils import launching


def test_a_job_has_ranks_and_a_time_limit(tmp_path):
    with pytest.raises(ValueError, match="tasks is empty"):
        launching.run_programs([], tmp_path / "log")
    task = launching.Task("platform", (), {})
    with pytest.raises(ValueError, match="timeout=0 must be positive"):
        launching.run_programs([task], tmp_path / "log", timeout=0)
