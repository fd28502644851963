"""`course grade --lms canvas|moodle`: the gradebook in the column layout each LMS imports.

One grade column per lesson, named "Lesson NN", holding the lesson's points; a learner without
a graded submission of that lesson gets an empty cell. The learner's name as collected (the
folder or file-name prefix) is the identifier: collect the notebooks under the learners' LMS
logins and the rows match. The layouts follow each LMS's own importer (README, "Grading",
names the sources):

- Canvas (Grades > Import): a header `Student, ID, SIS User ID, SIS Login ID, Section`, then one
  column per assignment; a second row starting "Points Possible" may give each column's points.
  Canvas finds the student by ID, else SIS User ID, else SIS Login ID, else by name; an
  assignment by its title (a new title makes a new assignment); an empty cell changes nothing.
  Here Student and SIS Login ID hold the learner, ID, SIS User ID and Section are left empty.
- Moodle (Grades > Import > CSV file): any header; at import the teacher maps one column to the
  user ("Map from" this column, "Map to" username, email or ID number) and each other column to
  a grade item (an existing one, or a new one). A `-` or an empty cell is "no grade".
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict

from course_utils.grading.grader.gradebook import SubmissionGrade

LAYOUTS = ("canvas", "moodle")
CANVAS_STUDENT_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_USER_COLUMN = "Username"


def lesson_column(lesson: str) -> str:
    return f"Lesson {lesson}"


def _by_learner(grades: list[SubmissionGrade]) -> tuple[list[str], dict[str, dict]]:
    """(lessons in order, learner -> lesson -> grade)."""
    table: dict[str, dict[str, SubmissionGrade]] = defaultdict(dict)
    for g in grades:
        table[g.learner][g.lesson] = g
    return sorted({g.lesson for g in grades}), dict(sorted(table.items()))


def _points_possible(grades: list[SubmissionGrade], lesson: str) -> int:
    return max((g.max_total for g in grades if g.lesson == lesson), default=0)


def canvas_csv(grades: list[SubmissionGrade]) -> str:
    """The gradebook as Canvas's gradebook import reads it (module docstring)."""
    lessons, table = _by_learner(grades)
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow([*CANVAS_STUDENT_COLUMNS, *map(lesson_column, lessons)])
    out.writerow(
        [CANVAS_POINTS_ROW, "", "", "", "", *(_points_possible(grades, n) for n in lessons)]
    )
    for learner, own in table.items():
        points = [own[n].total if n in own else "" for n in lessons]
        out.writerow([learner, "", "", learner, "", *points])
    return buf.getvalue()


def moodle_csv(grades: list[SubmissionGrade]) -> str:
    """The gradebook as Moodle's CSV grade import reads it (module docstring)."""
    lessons, table = _by_learner(grades)
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow([MOODLE_USER_COLUMN, *map(lesson_column, lessons)])
    for learner, own in table.items():
        out.writerow([learner, *(own[n].total if n in own else "" for n in lessons)])
    return buf.getvalue()


def export(layout: str, grades: list[SubmissionGrade]) -> str:
    """The gradebook in `layout` ("canvas" or "moodle")."""
    writers = {"canvas": canvas_csv, "moodle": moodle_csv}
    if layout not in writers:
        raise ValueError(f"--lms {layout!r}: give one of {', '.join(LAYOUTS)}")
    return writers[layout](grades)
