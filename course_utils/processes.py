"""Child processes, the one way: in a session of their own, within a time limit, and never left
behind (the whole tree ends with them, its stragglers too).

`run` runs a command to its end and returns a `Finished`; `started` is the context manager under
it, for callers that need the running process (a grading run writing to a log, a step streaming
to the terminal). Call them as `processes.run(...)`, never `from ... import run`: the fast tests
replace `processes.run` with one that answers as `scontrol`, `git` or `nvidia-smi` would
(tests/conftest.py `fake_commands`), so they start no process.
Used by every part of the course that starts one: launches (`distributed.launch`), the C++ build,
probes of git, scontrol, nvidia-smi and py-spy, `make test-gpu`'s steps, the grader's runs.
Lessons 05 and 09 launch through it (`distributed.launch`, `failures.provoke`).
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import psutil


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


def kill_session(proc: subprocess.Popen | multiprocessing.process.BaseProcess) -> None:
    """SIGKILL every process in the session `proc` leads (started by `started`, or with
    start_new_session=True; a rank of `launching.run_programs`): what it started goes too, even
    when `proc` itself has ended."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def end_tree(proc: subprocess.Popen) -> None:
    """End `proc`, everything in its session, and its descendants that left the session (a
    daemon that called setsid); then reap it. Descendants are listed before anything is killed:
    once their parent is gone they are no longer found under it."""
    stragglers = _descendants(proc.pid)
    kill_session(proc)
    for child in stragglers:
        with contextlib.suppress(psutil.Error):
            child.kill()
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@contextlib.contextmanager
def started(
    command: Sequence[str | os.PathLike], *, env: Mapping[str, str] | None = None, **popen
) -> Iterator[subprocess.Popen]:
    """`subprocess.Popen(command, ...)` in a session of its own; when the block ends (normally,
    by an exception or by Ctrl-C) the whole tree ends with it (`end_tree`)."""
    proc = subprocess.Popen(
        [str(c) for c in command],
        env=None if env is None else dict(env),
        start_new_session=True,
        **popen,
    )
    try:
        yield proc
    finally:
        end_tree(proc)


def wait(proc: subprocess.Popen, timeout: float | None) -> bool:
    """Wait for `proc` up to `timeout` seconds (None: for ever); True when it ran past it."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return True
    return False


@dataclass(frozen=True)
class Finished:
    """How a command ended and what it printed."""

    command: tuple[str, ...]
    returncode: int | None  # None: still running at its time limit, and killed
    stdout: str
    stderr: str  # empty when stderr went into stdout (merge=True)
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """ "exit code 1", "signal 9 (SIGKILL)" or "killed after its time limit"."""
        return (
            "killed after its time limit" if self.timed_out else exit_description(self.returncode)
        )


def run(
    command: Sequence[str | os.PathLike],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    merge: bool = False,
    on_line: Callable[[str], None] | None = None,
) -> Finished:
    """Run `command` to its end, at most `timeout` seconds, and return what it printed.

    merge: stderr goes into stdout, in the order it was written (a launch's ranks). on_line:
    called with each line of stdout as it comes (a notebook cell shows a launch live). Past the
    limit the whole tree is killed and `returncode` is None. Raises only what Popen raises for a
    command that cannot start (FileNotFoundError, PermissionError).
    """
    start = time.monotonic()
    stderr = subprocess.STDOUT if merge else subprocess.PIPE
    with started(
        command,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        errors="replace",
        bufsize=1,
    ) as proc:
        timed_out = threading.Event()

        def kill_at_limit():
            timed_out.set()
            end_tree(proc)

        watchdog = threading.Timer(timeout, kill_at_limit)
        watchdog.daemon = True
        watchdog.start()
        errors: list[str] = []
        drain = None
        if not merge:  # read stderr beside stdout, so neither pipe fills and blocks the child
            drain = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
            drain.start()
        lines = []
        try:
            for line in proc.stdout:
                lines.append(line)
                if on_line is not None:
                    on_line(line)
            proc.wait()
        finally:
            watchdog.cancel()
        if drain is not None:
            drain.join()
    returncode = None if timed_out.is_set() else proc.returncode
    return Finished(
        tuple(str(c) for c in command),
        returncode,
        "".join(lines),
        "".join(errors),
        time.monotonic() - start,
    )
