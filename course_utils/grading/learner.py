"""Old path: `course check` is now grading/grader/learner.py (_moved.py)."""

from course_utils.grading._moved import forward

__getattr__ = forward(__name__, "course_utils.grading.grader.learner")
