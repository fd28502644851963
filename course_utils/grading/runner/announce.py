"""A pytest plugin inside every graded run: it tells a listener when each check cell runs.

Loaded with `-p course_utils.grading.runner.announce --course-announce-fd N`, where N is one end
of a socket pair whose other end the caller holds (the grader gives it to the judge). Before a
cell whose course metadata says `"role": "check"` runs, it sends `{"op": "open", "exercise":
"01.2", "kernel": PID}` (the kernel's process id as this run numbers it) and waits for the
answer; after the cell, `{"op": "close", ...}`. The runner runs no code of the learner's, and
the kernel cannot reach this channel: the descriptor is not inherited by the kernel (a kernel
starts with close_fds), and this process turns itself non-dumpable, so a process of the same
user cannot trace it or open its descriptors through /proc.
"""

from __future__ import annotations

import ctypes
import os
import socket

import pytest

from course_utils import messages
from course_utils.grading.notebooks import course_meta

ANSWER_TIMEOUT = 600.0  # seconds the judge may take to note an announcement (it may be checking)
_CHANNEL: dict[str, socket.socket] = {}


def pytest_addoption(parser):
    parser.addoption(
        "--course-announce-fd",
        type=int,
        help="course grade: announce each check cell on this socket descriptor",
    )


def pytest_configure(config):
    fd = config.getoption("course_announce_fd")
    if fd is None:
        return
    os.set_inheritable(fd, False)
    listen_on(socket.socket(fileno=fd))
    non_dumpable()


def listen_on(channel: socket.socket) -> None:
    """Announce this session's check cells on `channel` (the judge's plugin, in-process)."""
    channel.settimeout(ANSWER_TIMEOUT)
    _CHANNEL["socket"] = channel


def non_dumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): no ptrace, no /proc/PID/fd of this process for its peers."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE


def kernel_pid(item) -> int | None:
    kernel = getattr(item.parent, "kernel", None)
    provisioner = getattr(getattr(kernel, "km", None), "provisioner", None)
    return getattr(provisioner, "pid", None)


def say(message: dict) -> None:
    """Send `message` on the channel and wait for its answer (the listener has noted it)."""
    channel = _CHANNEL.get("socket")
    if channel is None:
        return
    messages.send(channel, message)
    messages.receive(channel)


def check_cell(item) -> str | None:
    """The exercise id of `item` when it is a check cell of nbval's, else None."""
    cell = getattr(item, "cell", None)
    meta = course_meta(cell) if isinstance(cell, dict) else {}
    return meta.get("exercise") if meta.get("role") == "check" else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    exercise = check_cell(item) if _CHANNEL else None
    if exercise is not None:
        say({"op": "open", "exercise": exercise, "kernel": kernel_pid(item)})


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item):
    exercise = check_cell(item) if _CHANNEL else None
    if exercise is not None:
        say({"op": "close", "exercise": exercise})
