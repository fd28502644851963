"""Run `pytest --nbval` on one notebook in a child process, within limits, and read its record.

By default the run (pytest and the kernel it starts) is in a bubblewrap sandbox (sandbox.py): it
sees the notebook, the Python installation and course_utils read-only, a private tmpfs as HOME
and TMPDIR, no network, none of the machine's other processes or files; its processes, memory,
file sizes and CPU time are limited. With `Limits(sandbox=False)` (`course check`, and `course
grade --no-sandbox`) it runs as the grader's user, HOME and TMPDIR in the notebook's folder.

Either way the child starts through `processes.started` (a session of its own) with a unique
token and OMP/MKL threads set, dumps no core and writes no file over its size limit. At the
notebook's time limit, or when it ends, every process of the run is ended (leftovers.py). A run
has one temporary folder, removed when it ends: the notebook (`run_notebook`) and the run's own
files (record, log, pytest.ini, the sandbox's /etc files). A caller's Unix sockets (`sockets`:
a variable name -> the socket's path) are shown inside the run, each variable naming its path as
the run sees it: the one door a run has to a process of the caller's (`course grade`'s judge).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils import processes
from course_utils.grading.runner import cgroups, commands, leftovers
from course_utils.grading.runner.limits import Limits

MAX_RECORD_BYTES = 20 * 2**20  # what is read of a run's record (a flood of lines stops there)
LOG_TAIL = 20_000  # characters of each run's pytest log that are kept
LOG = "pytest.log"


@dataclass
class Run:
    records: dict[int, dict]  # code cell number -> what nbval_record wrote
    timed_out: bool  # the per-notebook limit was hit
    returncode: int | None
    log: str


def run_notebook(
    notebook: nbformat.NotebookNode,
    name: str,
    limits: Limits,
    variables: Mapping[str, str] | None = None,
    sockets: Mapping[str, Path] | None = None,
    announce: socket.socket | None = None,
    masked: tuple = (),
) -> Run:
    """Run `notebook`, written as `name` into the run's temporary folder, within the limits;
    `variables` are set in the run, `sockets` shown in it, each check cell announced on
    `announce` (one end of a socket pair the caller made), and `masked` folders hidden from it
    (`sandbox.Layout.masked`)."""
    with _temporary_folder("course-grade-") as folder:
        (folder / "home").mkdir()
        (folder / "run").mkdir()
        path = folder / "home" / name
        nbformat.write(notebook, path)
        return run_in(path, limits, folder / "run", variables, sockets, announce, masked)


def run_nbval(notebook: Path, limits: Limits) -> Run:
    """Run the notebook file `notebook` within the limits; never raises.

    In the sandbox the notebook's folder is not visible: only the notebook file is.
    """
    with _temporary_folder("course-grade-private-") as private:
        return run_in(notebook, limits, private)


def run_in(
    notebook: Path,
    limits: Limits,
    private: Path,
    variables: Mapping[str, str] | None = None,
    sockets: Mapping[str, Path] | None = None,
    announce: socket.socket | None = None,
    masked: tuple = (),
) -> Run:
    """Run `notebook`, with the run's own files (record, log, pytest.ini) in `private`."""
    token = uuid.uuid4().hex
    (private / commands.INI).write_text("[pytest]\n")
    (private / commands.RECORD).touch()
    fds = () if announce is None else (announce.fileno(),)
    with cgroups.process_cap(limits.max_procs if limits.sandbox else 0) as group:
        announce_fd = fds[0] if fds else None
        cmd, env = commands.command(
            notebook, limits, private, token, variables, sockets, announce_fd, masked
        )
        if group is not None:
            cmd = group.enter_command() + cmd
        timed_out, returncode = _run(cmd, env, private, token, limits, group, fds)
    log = (private / LOG).read_bytes()[-LOG_TAIL:].decode("utf-8", errors="replace")
    records = read_records(private / commands.RECORD)
    return Run(records, timed_out, returncode, log)


def _run(
    cmd, env, cwd: Path, token: str, limits: Limits, group, fds: tuple[int, ...] = ()
) -> tuple[bool, int | None]:
    """Start the run, wait up to the notebook's limit, end what is left: (timed out, exit code).
    `fds` are descriptors the run inherits (the announcing channel)."""
    with (
        open(cwd / LOG, "wb") as out,
        processes.started(
            cmd,
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=fds,
        ) as proc,
        leftovers.tracked(proc, token, group),  # also what learner code left after a normal end
    ):
        if not limits.sandbox:  # in the sandbox, prlimit sets these before pytest starts
            _limit_resources(proc.pid, limits.max_file_size)
        timed_out = processes.wait(proc, limits.timeout)
    return timed_out, None if timed_out else proc.returncode


def _limit_resources(pid: int, max_file_size: int) -> None:
    """No core dumps and no file over `max_file_size`; the kernel, started later, inherits both."""
    import psutil

    try:
        p = psutil.Process(pid)
        p.rlimit(psutil.RLIMIT_CORE, (0, 0))
        if max_file_size:
            p.rlimit(psutil.RLIMIT_FSIZE, (max_file_size, max_file_size))
    except (psutil.Error, OSError, ValueError):
        pass  # the process already ended, or limits are lower already


def read_records(path: Path) -> dict[int, dict]:
    """Code cell number -> its record, from the lines nbval_record wrote (at most
    MAX_RECORD_BYTES of them; a line that is not a record is passed over)."""
    records = {}
    if path.exists():
        with open(path, "rb") as f:
            text = f.read(MAX_RECORD_BYTES).decode("utf-8", errors="replace")
        for line in text.splitlines():
            try:
                rec = json.loads(line)
                records[int(rec["cell"])] = rec
            except (ValueError, KeyError, TypeError):
                continue
    return records


@contextlib.contextmanager
def _temporary_folder(prefix: str):
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
