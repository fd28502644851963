"""What `course grade` hands back: the gradebook CSV, feedback per learner (Markdown and HTML), a
JUnit report, a table for the terminal (one row per learner).

Every file is written atomically (a temporary file in the same folder, then `os.replace`), so an
interrupted run never leaves a half-written gradebook where the old one was.
"""

from __future__ import annotations

import csv
import html
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
    held_out: int = 0  # held-out cases the exercise has (only the instructor's grade runs them)
    held_out_passed: int | None = None  # of them, how many passed; None: they did not run
    evidence: str = ""  # what the verdict rests on: "sacct 4217: ...", "local run at ..."

    @property
    def points(self) -> int:
        return self.max_points if self.verdict == "passed" else 0

    def held_out_text(self) -> str:
        """ "3/4 held-out cases passed", "4 held-out cases, not run: ...", or "" without any."""
        if not self.held_out:
            return ""
        if self.held_out_passed is None:
            return f"{self.held_out} held-out cases, not run (the visible cases must pass first)"
        return f"{self.held_out_passed}/{self.held_out} held-out cases passed"


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
    seed: int | None = None  # the held-out cases' seed (`course grade --seed`)
    slurm: str = ""  # what the learner's jobs were held to (grader/slurm_rules.py)

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
    header = [
        "learner",
        "lesson",
        *ids,
        "total",
        "max",
        "status",
        "reason",
        "flags",
        "evidence",
        "slurm",
        "sandbox",
        "seed",
    ]
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
                "; ".join(f"{e.exercise_id}: {e.evidence}" for e in g.exercises if e.evidence),
                g.slurm,
                g.sandbox,
                "" if g.seed is None else g.seed,
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
            text += f" ({e.held_out_text()})" if e.held_out else ""
            text += f" [evidence: {e.evidence}]" if e.evidence else ""
            lines.append(f"- **{e.exercise_id}** {e.title} ({e.points}/{e.max_points}): {text}")
        if g.notes:
            lines += ["", "Notes on your notebook:", *(f"- {n}" for n in g.notes)]
        lines.append("")
    lines.append(FEEDBACK_FOOTER)
    return "\n".join(lines) + "\n"


FEEDBACK_FOOTER = (
    "Only the exercise cells of your notebook are graded; every other cell, and every check "
    "cell, is taken from the released notebook. Run `course check NN` to see the verdicts the "
    "grader will give on the visible cases; held-out cases run only in the instructor's grade."
)


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
    """A plain-text table for the terminal. Grades of several lessons: one row per learner, a
    total per lesson (`class_table`); of one lesson (`course grade --lesson NN`): one row per
    learner with that lesson's exercises (`exercise_table`). The CSV keeps every exercise."""
    lessons = {g.lesson for g in grades}
    return exercise_table(grades) if len(lessons) <= 1 else class_table(grades)


def exercise_table(grades: list[SubmissionGrade]) -> str:
    """One row per submission, a column per exercise."""
    ids = exercise_ids(grades)
    header = ["learner", "lesson", *ids, "total", "status"]
    rows = []
    for g in sorted(grades, key=lambda g: (g.lesson, g.learner)):
        points = {e.exercise_id: str(e.points) for e in g.exercises}
        rows.append(
            [
                g.learner,
                g.lesson,
                *(points.get(i, "-") for i in ids),
                f"{g.total}/{g.max_total}",
                _status_text(g),
            ]
        )
    return text_table(header, rows, right=())


def class_table(grades: list[SubmissionGrade]) -> str:
    """One row per learner: points/max per lesson ("-" where none was graded), the total, and
    the lessons whose run did not end ok."""
    lessons = sorted({g.lesson for g in grades})
    by_learner: dict[str, dict[str, SubmissionGrade]] = defaultdict(dict)
    for g in grades:
        by_learner[g.learner][g.lesson] = g
    rows = []
    for learner in sorted(by_learner):
        own = by_learner[learner]
        cells = [f"{own[n].total}/{own[n].max_total}" if n in own else "-" for n in lessons]
        total = sum(g.total for g in own.values())
        most = sum(g.max_total for g in own.values())
        trouble = [f"{n} {own[n].status}" for n in sorted(own) if own[n].status != OK]
        rows.append([learner, *cells, f"{total}/{most}", "; ".join(trouble)[:60] or OK])
    return text_table(["learner", *lessons, "total", "status"], rows, right=())


def _status_text(g: SubmissionGrade) -> str:
    return g.status if g.status == OK else f"{g.status}: {g.reason}"[:60]


def feedback_html(learner: str, grades: list[SubmissionGrade]) -> str:
    """The learner's feedback as a page: per lesson, each exercise's verdict and message (and
    its held-out cases); every text escaped."""
    e_ = html.escape
    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
        f"<title>Feedback for {e_(learner)}</title>",
        f"<style>{_FEEDBACK_CSS}</style>\n</head>\n<body>",
        f"<h1>Feedback for {e_(learner)}</h1>",
    ]
    for g in sorted(grades, key=lambda g: g.lesson):
        parts.append(f"<h2>Lesson {e_(g.lesson)}: {g.total}/{g.max_total} points</h2>")
        if g.status != OK:
            parts.append(f'<p class="status">Status: {e_(g.status)}. {e_(g.reason)}</p>')
        parts.append(
            "<table>\n<tr><th>Exercise</th><th>Title</th><th>Points</th><th>Verdict</th>"
            "<th>Message</th><th>Held-out cases</th><th>Evidence</th></tr>"
        )
        for x in g.exercises:
            css = x.verdict.replace(" ", "-")
            parts.append(
                f'<tr class="{e_(css)}"><td>{e_(x.exercise_id)}</td><td>{e_(x.title)}</td>'
                f"<td>{x.points}/{x.max_points}</td><td>{e_(x.verdict)}</td>"
                f"<td>{e_(x.message)}</td><td>{e_(x.held_out_text())}</td>"
                f"<td>{e_(x.evidence)}</td></tr>"
            )
        parts.append("</table>")
        if g.notes:
            notes = "".join(f"<li>{e_(n)}</li>" for n in g.notes)
            parts.append(f"<p>Notes on your notebook:</p>\n<ul>{notes}</ul>")
    parts += [f"<p>{e_(FEEDBACK_FOOTER)}</p>", "</body>\n</html>"]
    return "\n".join(parts) + "\n"


_FEEDBACK_CSS = (
    "body{font-family:sans-serif;max-width:60em;margin:2em auto}"
    "table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.3em;"
    "text-align:left;vertical-align:top}.passed td:nth-child(4){color:#060}"
    ".failed td:nth-child(4){color:#a00}.status{color:#a00}"
)


def write_outputs(out: Path, grades: list[SubmissionGrade]) -> dict[str, Path]:
    """Write gradebook.csv, junit.xml and feedback/<learner>.md and .html under `out`; returns
    the paths."""
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
        name = safe_name(learner)
        atomic_write_text(paths["feedback"] / f"{name}.md", feedback_markdown(learner, own))
        atomic_write_text(paths["feedback"] / f"{name}.html", feedback_html(learner, own))
    return paths
