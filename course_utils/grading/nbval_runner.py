"""Old path: the nbval run is now grading/runner/nbval_runner.py, with limits.py and
leftovers.py (_moved.py)."""

from course_utils.grading._moved import forward

__getattr__ = forward(
    __name__,
    "course_utils.grading.runner.nbval_runner",
    "course_utils.grading.runner.limits",
    "course_utils.grading.runner.leftovers",
)
