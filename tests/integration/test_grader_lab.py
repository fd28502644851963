"""Lesson 10 graded in the sandbox, as `course grade` grades it: no Slurm and no network there,
so the lab's checks run their steps on the local route (one forked process per rank, meeting
over the sandbox's own loopback) and say so; the solution earns every point."""

import csv
import shutil

import pytest

from course_utils.cli import main
from course_utils.paths import REPO_ROOT

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


def test_the_lesson10_solution_earns_every_point_in_the_sandbox(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    lesson = "10_cluster_lab.ipynb"
    shutil.copy(REPO_ROOT / "solutions" / lesson, subs / f"ann__{lesson}")
    assert main(["grade", str(subs), "--out", str(out), "--seed", "10"]) == 0
    with open(out / "gradebook.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    feedback = (out / "feedback" / "ann.md").read_text()
    shown = (out / "feedback" / "ann.html").read_text()  # with each check's own words
    assert row["sandbox"].startswith("bubblewrap"), row
    points = tuple(row[e] for e in ("10.1", "10.2", "10.3", "10.4"))
    assert (points, row["status"]) == (("1", "1", "1", "1"), "ok"), feedback
    assert "[via local ranks: no Slurm here]" in shown
