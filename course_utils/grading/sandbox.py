"""Old path: the sandbox is now grading/runner/sandbox.py, with cgroups.py and limits.py
(_moved.py)."""

from course_utils.grading._moved import forward

__getattr__ = forward(
    __name__,
    "course_utils.grading.runner.sandbox",
    "course_utils.grading.runner.cgroups",
    "course_utils.grading.runner.limits",
)
