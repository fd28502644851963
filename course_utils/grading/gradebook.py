"""Old path: the gradebook is now grading/grader/gradebook.py; `clip` is in runner/outputs.py
(_moved.py)."""

from course_utils.grading._moved import forward

__getattr__ = forward(
    __name__,
    "course_utils.grading.grader.gradebook",
    "course_utils.grading.runner.outputs",
)
