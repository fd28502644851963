"""What `course grade` hands back: the gradebook CSV, feedback per learner, a JUnit report, a table.

Every file is written atomically (a temporary file in the same folder, then `os.replace`), so an
interrupted run never leaves a half-written gradebook where the old one was.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from course_utils.files import atomic_write_text
from course_utils.tables import text_table

# Status of a submission as a whole; points are still given for the checks that ran.
OK, TIMEOUT, CRASHED, UNREADABLE, ERROR = "ok", "timeout", "crashed", "unreadable", "error"


@dataclass(frozen=True)
class ExerciseGrade:
    exercise_id: str
    title: str
    max_points: int
    verdict: str  # one of grading's verdicts: passed, failed, not attempted yet
    message: str

    @property
    def points(self) -> int:
        return self.max_points if self.verdict == "passed" else 0


@dataclass
class SubmissionGrade:
    learner: str
    lesson: str
    source: str  # the submitted file, as found
    status: str = OK
    reason: str = ""
    exercises: list[ExerciseGrade] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # for the instructor to review; no points
    notes: list[str] = field(default_factory=list)  # how the submission was read
    seconds: float = 0.0
    sandbox: str = ""  # what bounded the run (runner's Limits.describe); "none" without one

    @property
    def total(self) -> int:
        return sum(e.points for e in self.exercises)

    @property
    def max_total(self) -> int:
        return sum(e.max_points for e in self.exercises)


def safe_name(text: str) -> str:
    """A file-name-safe version of a learner name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "learner"


def exercise_ids(grades: list[SubmissionGrade]) -> list[str]:
    ids = {e.exercise_id for g in grades for e in g.exercises}
    return sorted(ids, key=lambda i: tuple(map(int, i.split("."))))


def gradebook_csv(grades: list[SubmissionGrade]) -> str:
    """One row per submission: points per exercise, total, status and why, review flags, and
    the sandbox and limits it ran in ("none" when graded with --no-sandbox)."""
    ids = exercise_ids(grades)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = ["learner", "lesson", *ids, "total", "max", "status", "reason", "flags", "sandbox"]
    writer.writerow(header)
    for g in sorted(grades, key=lambda g: (g.lesson, g.learner)):
        points = {e.exercise_id: e.points for e in g.exercises}
        writer.writerow(
            [
                g.learner,
                g.lesson,
                *(points.get(i, "") for i in ids),
                g.total,
                g.max_total,
                g.status,
                g.reason,
                "; ".join(g.flags),
                g.sandbox,
            ]
        )
    return buf.getvalue()


def feedback_markdown(learner: str, grades: list[SubmissionGrade]) -> str:
    """The feedback a learner gets: per lesson, each exercise passed or the check's message."""
    lines = [f"# Feedback for {learner}", ""]
    for g in sorted(grades, key=lambda g: g.lesson):
        lines += [f"## Lesson {g.lesson}: {g.total}/{g.max_total} points", ""]
        if g.status != OK:
            lines += [f"**Status: {g.status}.** {g.reason}", ""]
        for e in g.exercises:
            text = "passed" if e.verdict == "passed" else f"{e.verdict}: {e.message}"
            lines.append(f"- **{e.exercise_id}** {e.title} ({e.points}/{e.max_points}): {text}")
        if g.notes:
            lines += ["", "Notes on your notebook:", *(f"- {n}" for n in g.notes)]
        lines.append("")
    lines.append(
        "Only the exercise cells of your notebook are graded; every other cell, and every "
        "check cell, is taken from the released notebook. Run `course check NN` to see "
        "the verdicts the grader will give."
    )
    return "\n".join(lines) + "\n"


def junit_xml(grades: list[SubmissionGrade]) -> str:
    """A JUnit report: one test suite per submission, one test case per exercise."""
    root = ET.Element("testsuites", name="course grade")
    for g in sorted(grades, key=lambda g: (g.lesson, g.learner)):
        failures = sum(e.verdict != "passed" for e in g.exercises)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"{g.learner}.{g.lesson}",
            tests=str(len(g.exercises)),
            failures=str(failures),
            errors="0" if g.status == OK else "1",
            time=f"{g.seconds:.1f}",
        )
        if g.status != OK:
            ET.SubElement(suite, "properties").append(
                ET.Element("property", name="status", value=f"{g.status}: {g.reason}")
            )
        for e in g.exercises:
            case = ET.SubElement(
                suite, "testcase", classname=f"{g.learner}.{g.lesson}", name=e.exercise_id
            )
            if e.verdict == "not attempted yet":
                ET.SubElement(case, "skipped", message=e.message)
            elif e.verdict != "passed":
                ET.SubElement(case, "failure", message=e.message)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def summary_table(grades: list[SubmissionGrade]) -> str:
    """A plain-text table for the terminal: one row per submission."""
    ids = exercise_ids(grades)
    header = ["learner", "lesson", *ids, "total", "status"]
    rows = []
    for g in sorted(grades, key=lambda g: (g.lesson, g.learner)):
        points = {e.exercise_id: str(e.points) for e in g.exercises}
        status = g.status if g.status == OK else f"{g.status}: {g.reason}"[:60]
        rows.append(
            [
                g.learner,
                g.lesson,
                *(points.get(i, "-") for i in ids),
                f"{g.total}/{g.max_total}",
                status,
            ]
        )
    return text_table(header, rows, right=())


def write_outputs(out: Path, grades: list[SubmissionGrade]) -> dict[str, Path]:
    """Write gradebook.csv, junit.xml and feedback/<learner>.md under `out`; returns the paths."""
    paths = {
        "gradebook": out / "gradebook.csv",
        "junit": out / "junit.xml",
        "feedback": out / "feedback",
    }
    atomic_write_text(paths["gradebook"], gradebook_csv(grades))
    atomic_write_text(paths["junit"], junit_xml(grades))
    by_learner = defaultdict(list)
    for g in grades:
        by_learner[g.learner].append(g)
    for learner, own in by_learner.items():
        text = feedback_markdown(learner, own)
        atomic_write_text(paths["feedback"] / f"{safe_name(learner)}.md", text)
    return paths
