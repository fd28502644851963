"""Child processes: how one ended, and ending a whole tree of them.

Used wherever the course starts processes it must not leave behind: `distributed.launch`, the
C++ and package-loading probes, `make test-gpu`'s steps, the grader's runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def exit_description(returncode: int | None) -> str:
    """ "exit code 1", "signal 11 (SIGSEGV)" (a negative code is a signal), or "still running"."""
    if returncode is None:
        return "still running"
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        return f"signal {-returncode} ({signal.Signals(-returncode).name})"
    except ValueError:
        return f"signal {-returncode}"


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL every process in the session `proc` leads (start it with start_new_session=True):
    what it started goes too, even when `proc` itself has already ended."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
