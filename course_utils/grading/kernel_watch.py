"""Old path: the kernel watch is now grading/runner/kernel_watch.py (_moved.py). pytest finds a
plugin's hooks by name, so the hook is imported here; `-p course_utils.grading.kernel_watch`
still works."""

from course_utils.grading._moved import forward
from course_utils.grading.runner.kernel_watch import pytest_configure

__all__ = ["pytest_configure"]
__getattr__ = forward(__name__, "course_utils.grading.runner.kernel_watch")
