"""Lesson 10 graded in the sandbox, as `course grade` grades it: no Slurm and no network there,
so the lab's steps run on the local route (one forked process per rank, meeting over the
sandbox's own loopback) and the checks say so; the solution earns every point, unflagged, its
held-out cases passed; the blank notebook earns none (its runs never start: each check says
what to run first). Forged runs: tests/integration/test_hostile_lab.py."""

import csv
import shutil

import pytest

from course_utils.cli import main
from course_utils.paths import REPO_ROOT

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


def test_the_lesson10_solution_earns_every_point_and_the_blank_none(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    lesson = "10_cluster_lab.ipynb"
    shutil.copy(REPO_ROOT / "solutions" / lesson, subs / f"ann__{lesson}")
    shutil.copy(REPO_ROOT / "notebooks" / lesson, subs / f"bob__{lesson}")
    assert main(["grade", str(subs), "--out", str(out), "--seed", "10", "-j", "1"]) == 0
    with open(out / "gradebook.csv", newline="") as f:
        rows = {row["learner"]: row for row in csv.DictReader(f)}
    feedback = (out / "feedback" / "ann.md").read_text()
    shown = (out / "feedback" / "ann.html").read_text()  # with each check's own words
    ann, bob = rows["ann"], rows["bob"]
    assert ann["sandbox"].startswith("bubblewrap"), ann
    points = tuple(ann[e] for e in ("10.1", "10.2", "10.3", "10.4"))
    assert (points, ann["status"], ann["flags"]) == (("1", "1", "1", "1"), "ok", ""), feedback
    assert "held-out cases passed" in feedback and "[via local ranks: no Slurm here]" in shown
    assert (bob["total"], bob["status"]) == ("0", "ok"), bob
