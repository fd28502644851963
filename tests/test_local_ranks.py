"""local_ranks: what it refuses before it starts anything (the runs: tests/integration)."""

import pytest

from course_utils import local_ranks


def test_a_job_has_ranks_and_a_time_limit(tmp_path):
    with pytest.raises(ValueError, match="tasks is empty"):
        local_ranks.run([], tmp_path / "log")
    task = local_ranks.Task("platform", (), {})
    with pytest.raises(ValueError, match="timeout=0 must be positive"):
        local_ranks.run([task], tmp_path / "log", timeout=0)
