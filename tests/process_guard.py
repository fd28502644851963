"""The fast lane's guard: a test outside tests/integration that starts a process is refused.

An audit hook (https://docs.python.org/3/library/audit_events.html) sees every start of a
process: subprocess, os.system, the exec and spawn families, and os.fork (multiprocessing,
DataLoader workers). A hook cannot be removed once added, so it only acts while `STATE["test"]`
names a test; tests/conftest.py's autouse fixture `no_processes` sets it for each fast test.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Iterator

import pytest

PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.system",
        "os.exec",
        "os.spawn",
    }
)
STATE: dict = {"test": None, "started": []}  # the guarded test's id; what it tried to start


def _text(word) -> str:
    return os.fsdecode(word) if isinstance(word, bytes | os.PathLike) else str(word)


def _what(event: str, args: tuple) -> str:
    """The command an audit event starts, as a shell would show it ("os.fork" for a fork)."""
    if event == "subprocess.Popen":
        argv = args[1]
        return _text(argv) if isinstance(argv, str | bytes) else shlex.join(map(_text, argv))
    if event in ("os.posix_spawn", "os.exec"):
        return shlex.join(map(_text, args[1]))
    if event == "os.spawn":
        return shlex.join(map(_text, args[2]))
    if event == "os.system":
        return _text(args[0])  # bytes, as the audit event carries it
    return event  # os.fork, os.forkpty: no command (DataLoader workers, multiprocessing)


def message(test: str, event: str, started: str) -> str:
    return (
        f"{test} started a process ({event}: {started}); the fast lane (tests/ outside "
        "tests/integration) starts none. Either move the test to tests/integration/, or inject "
        "the answer: the `fake_commands` fixture answers processes.run as git, scontrol or "
        "nvidia-smi would, `fake_gpus` reports GPUs, and a DataLoader runs without worker "
        "processes at num_workers=0."
    )


def _audit(event: str, args: tuple) -> None:
    test = STATE["test"]
    if test is None or event not in PROCESS_EVENTS:
        return
    refusal = message(test, event, _what(event, args))
    STATE["started"].append(refusal)
    # Refused with a BaseException (pytest's Failed), so that a caller's `except Exception` (a
    # probe that falls back) cannot swallow it; `guarding` also reports a swallowed one.
    pytest.fail(refusal, pytrace=False)


_installed = False


def install() -> None:
    """Add the audit hook (once per process)."""
    global _installed
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True


@contextlib.contextmanager
def guarding(test: str) -> Iterator[list[str]]:
    """Refuse every process start while the block runs; yields the list of refusals."""
    STATE["test"], STATE["started"] = test, []
    try:
        yield STATE["started"]
    finally:
        STATE["test"] = None


def forgive() -> None:
    """Forget the refusals so far (for the guard's own tests, which provoke them on purpose)."""
    STATE["started"].clear()
