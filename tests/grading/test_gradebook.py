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
        "evidence": "",
        "slurm": "",
        "sandbox": "",
        "seed": "",
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
    names = sorted(p.name for p in paths["feedback"].iterdir())
    assert names == ["ann.html", "ann.md", "bo_b.html", "bo_b.md"]
    before = paths["gradebook"].read_text()
    monkeypatch.setattr(files.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("full")))
    with pytest.raises(OSError, match="full"):
        files.atomic_write_text(paths["gradebook"], "half")
    assert paths["gradebook"].read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_class_prints_one_row_per_learner_with_a_total_per_lesson():
    def lesson(learner, number, points, status="ok"):
        return SubmissionGrade(
            learner,
            number,
            "x",
            status,
            "why" if status != "ok" else "",
            exercises=[
                ExerciseGrade(f"{number}.1", "a", 2, "passed" if points else "failed", ""),
                ExerciseGrade(f"{number}.2", "b", 1, "failed", ""),
            ],
        )

    grades = [lesson("ann", n, 2) for n in ("00", "01", "05")] + [
        lesson("bo", "01", 0, "timeout"),
        lesson("bo", "05", 2, "crashed"),
    ]
    lines = gradebook.summary_table(grades).splitlines()
    assert lines[0].split() == ["learner", "00", "01", "05", "total", "status"]
    assert lines[1].split() == ["ann", "2/3", "2/3", "2/3", "6/9", "ok"]
    assert lines[2].split() == ["bo", "-", "0/3", "2/3", "2/6", "01", "timeout;", "05", "crashed"]
    assert len(lines) == 3  # one row per learner, however many lessons
    one_lesson = gradebook.summary_table([g for g in grades if g.lesson == "05"]).splitlines()
    assert one_lesson[0].split() == ["learner", "lesson", "05.1", "05.2", "total", "status"]


def test_html_feedback_shows_each_verdict_and_escapes_every_text():
    hostile = SubmissionGrade(
        "<b>ann</b>",
        "01",
        "x",
        "crashed",
        "the kernel died in <script>alert(1)</script>",
        exercises=[
            ExerciseGrade("01.1", "flatten & view", 1, "failed", 'expected "a view", got <tensor>')
        ],
        notes=["exercise 01.3: <no cell>"],
    )
    page = gradebook.feedback_html("<b>ann</b>", [hostile])
    assert "<script>" not in page and "<b>ann</b>" not in page and "<tensor>" not in page
    assert "<title>Feedback for &lt;b&gt;ann&lt;/b&gt;</title>" in page
    assert "<td>flatten &amp; view</td>" in page
    assert "<td>failed</td><td>expected &quot;a view&quot;, got &lt;tensor&gt;</td>" in page
    assert "Status: crashed. the kernel died in &lt;script&gt;" in page
    assert "<li>exercise 01.3: &lt;no cell&gt;</li>" in page
    ok = gradebook.feedback_html("ann", [grades()[1]])
    assert '<tr class="passed"><td>01.1</td><td>flatten</td><td>1/1</td><td>passed</td>' in ok
