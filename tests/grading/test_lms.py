"""grader/lms: the gradebook in the column layouts Canvas's and Moodle's grade imports read
(the importers' own rules are quoted in lms.py's docstring and README, "Grading")."""

import csv
import io

import pytest

from course_utils.grading.grader import lms
from course_utils.grading.grader.gradebook import ExerciseGrade, SubmissionGrade


def graded(learner, lesson, points, most):
    exercises = [
        ExerciseGrade(f"{lesson}.{i + 1}", "x", 1, "passed" if i < points else "failed", "")
        for i in range(most)
    ]
    return SubmissionGrade(learner, lesson, f"{learner}/{lesson}.ipynb", exercises=exercises)


GRADES = [graded("bo", "05", 2, 3), graded("ann", "01", 4, 4), graded("ann", "05", 3, 3)]


def rows(text):
    return list(csv.reader(io.StringIO(text)))


def test_canvas_header_points_possible_row_and_one_row_per_learner():
    table = rows(lms.canvas_csv(GRADES))
    # GradebookImporter: row[0] holds "Student", row[1] "ID", then SIS User ID and SIS Login ID,
    # and the last student column "Section"; a row starting "Points Possible" gives the points
    assert table[0] == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "Lesson 01",
        "Lesson 05",
    ]
    assert table[1] == ["Points Possible", "", "", "", "", "4", "3"]
    assert table[2:] == [
        ["ann", "", "", "ann", "", "4", "3"],
        ["bo", "", "", "bo", "", "", "2"],  # no lesson 01 from bo: empty, Canvas changes nothing
    ]


def test_moodle_one_user_column_and_a_grade_column_per_lesson():
    assert rows(lms.moodle_csv(GRADES)) == [
        ["Username", "Lesson 01", "Lesson 05"],
        ["ann", "4", "3"],
        ["bo", "", "2"],
    ]


def test_a_learner_name_with_a_comma_or_quote_stays_one_cell():
    text = lms.canvas_csv([graded('Doe, "Jo"', "01", 1, 2)])
    assert rows(text)[2][:4] == ['Doe, "Jo"', "", "", 'Doe, "Jo"']


def test_an_unknown_layout_is_refused():
    with pytest.raises(ValueError, match="--lms 'blackboard': give one of canvas, moodle"):
        lms.export("blackboard", GRADES)
    assert lms.export("moodle", GRADES) == lms.moodle_csv(GRADES)
