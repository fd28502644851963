"""course_utils.processes: how a child ended, in words."""

import pytest

from course_utils.processes import exit_description


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (0, "exit code 0"),
        (3, "exit code 3"),
        (-11, "signal 11 (SIGSEGV)"),
        (-9, "signal 9 (SIGKILL)"),
        (-99, "signal 99"),
        (None, "still running"),
    ],
)
def test_exit_description(code, words):
    assert exit_description(code) == words
