"""gradebook: the CSV, feedback, JUnit report and terminal table that `course grade` writes."""

import csv
import io
import xml.etree.ElementTree as ET

import pytest

from course_utils import files
from course_utils.grading.grader import gradebook
from course_utils.grading.grader.gradebook import ExerciseGrade, SubmissionGrade


def grades():
    ok = SubmissionGrade(
        "ann",
        "01",
        "ann/01_tensors.ipynb",
        exercises=[
            ExerciseGrade("01.1", "flatten", 1, "passed", "fine"),
            ExerciseGrade("01.2", "standardize", 2, "failed", "expected 0, got 1"),
        ],
        notes=["exercise 01.3: no exercise cell found"],
        seconds=3.2,
    )
    slow = SubmissionGrade(
        "bo b",
        "01",
        "bo b__01.ipynb",
        "timeout",
        "cell 8 ran past 10 s",
        exercises=[
            ExerciseGrade("01.1", "flatten", 1, "not attempted yet", "x"),
            ExerciseGrade("01.2", "standardize", 2, "passed", "ok"),
        ],
        flags=["01.1: mentions solutions/"],
    )
    return [slow, ok]


def test_points_and_totals():
    ann = grades()[1]
    assert [e.points for e in ann.exercises] == [1, 0]
    assert (ann.total, ann.max_total) == (1, 3)


def test_gradebook_csv_has_a_row_per_submission():
    rows = list(csv.DictReader(io.StringIO(gradebook.gradebook_csv(grades()))))
    assert [r["learner"] for r in rows] == ["ann", "bo b"]
    assert rows[0] == {
        "learner": "ann",
        "lesson": "01",
        "01.1": "1",
        "01.2": "0",
        "total": "1",
        "max": "3",
        "status": "ok",
        "reason": "",
        "flags": "",
        "sandbox": "",
    }
    assert (rows[1]["status"], rows[1]["flags"]) == ("timeout", "01.1: mentions solutions/")


def test_feedback_says_passed_or_the_message():
    text = gradebook.feedback_markdown("ann", [grades()[1]])
    assert "## Lesson 01: 1/3 points" in text
    assert "**01.1** flatten (1/1): passed" in text
    assert "**01.2** standardize (0/2): failed: expected 0, got 1" in text
    assert "- exercise 01.3: no exercise cell found" in text
    assert "**Status: timeout.** cell 8 ran past 10 s" in gradebook.feedback_markdown(
        "bo b", [grades()[0]]
    )


def test_junit_xml():
    root = ET.fromstring(gradebook.junit_xml(grades()))
    ann = root.find("testsuite[@name='ann.01']")
    assert (ann.get("tests"), ann.get("failures"), ann.get("errors")) == ("2", "1", "0")
    assert ann.find("testcase[@name='01.2']/failure").get("message") == "expected 0, got 1"
    assert root.find("testsuite[@name='bo b.01']/testcase[@name='01.1']/skipped") is not None


def test_summary_table_aligns_columns():
    lines = gradebook.summary_table(grades()).splitlines()
    assert lines[0].split() == ["learner", "lesson", "01.1", "01.2", "total", "status"]
    assert lines[1].split()[:5] == ["ann", "01", "1", "0", "1/3"]
    assert "timeout: cell 8 ran past 10 s" in lines[2]


def test_write_outputs_is_atomic(tmp_path, monkeypatch):
    paths = gradebook.write_outputs(tmp_path, grades())
    assert sorted(p.name for p in paths["feedback"].iterdir()) == ["ann.md", "bo_b.md"]
    before = paths["gradebook"].read_text()
    monkeypatch.setattr(files.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("full")))
    with pytest.raises(OSError, match="full"):
        files.atomic_write_text(paths["gradebook"], "half")
    assert paths["gradebook"].read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
