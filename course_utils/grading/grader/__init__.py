"""The grader: submissions in, a gradebook out (`course grade`), and `course check` for learners.

It runs each notebook through the runner (grading/runner/), which knows nothing of grades; the
grader imports the runner, never the reverse (tests/test_layout.py).
    submissions.py  finding submissions in a folder; reading one (or saying why it cannot be)
    plan.py         the grading plan: the release with the learner's exercise cells, by id
    verdicts.py     the rules that give points: check outputs compared, each exercise judged,
                    the submission's status
    pipeline.py     one submission through all of it (`grade_notebook`), many (`grade_all`)
    gradebook.py    the gradebook CSV, feedback, JUnit report, the terminal's table
    command.py      `course grade`: its options checked, then grading, then the files
    learner.py      `course check NN`: the grader's verdicts for a learner's own notebook
The names below are the grader's API (`from course_utils.grading import grader`); the other
names of the old grader.py module are found in the modules above (../_moved.py).
"""

from course_utils.grading._moved import forward
from course_utils.grading.grader.command import check_sandbox, grade_main, limits_from_args
from course_utils.grading.grader.gradebook import ExerciseGrade, SubmissionGrade
from course_utils.grading.grader.pipeline import grade_all, grade_notebook
from course_utils.grading.grader.plan import (
    GradingPlan,
    Lesson,
    build_grading_notebook,
    learner_exercises,
    review_flags,
)
from course_utils.grading.grader.submissions import Submission, find_submissions, read_notebook
from course_utils.grading.grader.verdicts import compare_checks, judge
from course_utils.grading.runner.limits import Limits, default_limits

__all__ = [
    "ExerciseGrade",
    "GradingPlan",
    "Lesson",
    "Limits",
    "Submission",
    "SubmissionGrade",
    "build_grading_notebook",
    "check_sandbox",
    "compare_checks",
    "default_limits",
    "find_submissions",
    "grade_all",
    "grade_main",
    "grade_notebook",
    "judge",
    "learner_exercises",
    "limits_from_args",
    "read_notebook",
    "review_flags",
]

__getattr__ = forward(
    __name__,
    *(f"{__name__}.{m}" for m in ("submissions", "plan", "verdicts", "pipeline", "command")),
    "course_utils.grading.runner.nbval_runner",
    "course_utils.grading.runner.leftovers",
)
