"""Lesson 07 graded in the sandbox: the learner's C++ builds see the course's sources (read-only)
and a build folder of the run's own, so the solution earns every point (each build starts cold:
about 4 minutes on 2 cores)."""

import csv
import shutil

import pytest

from course_utils.cli import main
from course_utils.paths import REPO_ROOT

pytestmark = [pytest.mark.cpp, pytest.mark.bwrap, pytest.mark.slow]


def test_the_lesson07_solution_earns_every_point_in_the_sandbox(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    solution = REPO_ROOT / "solutions" / "07_deploying_to_cpp.ipynb"
    shutil.copy(solution, subs / "ann__07_deploying_to_cpp.ipynb")
    args = ["grade", str(subs), "--out", str(out), "--seed", "7", "--cell-timeout", "300"]
    assert main(args) == 0
    with open(out / "gradebook.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    feedback = (out / "feedback" / "ann.md").read_text()
    assert row["sandbox"].startswith("bubblewrap"), row
    assert (row["07.1"], row["07.2"], row["07.3"], row["status"]) == ("1", "1", "1", "ok"), feedback
    assert "3/3 held-out cases passed" in feedback
