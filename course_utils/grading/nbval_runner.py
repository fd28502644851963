"""Run `pytest --nbval` on one notebook in a subprocess, within limits, and read the results.

By default the run (pytest and the kernel it starts) is in a bubblewrap sandbox (sandbox.py): it
sees the notebook, the Python installation and course_utils read-only, a private tmpfs as HOME
and TMPDIR, no network, none of the machine's other processes or files; its processes, memory,
file sizes and CPU time are limited. With `Limits(sandbox=False)` (`course check`, and `course
grade --no-sandbox`) it runs as the grader's user, HOME and TMPDIR in the notebook's folder.

Either way the subprocess starts in a new session with a unique COURSE_GRADE_RUN token and
OMP/MKL threads set, dumps no core and writes no file over its size limit. At the notebook's
time limit, or when it ends, every process of the run is killed: pytest's descendants, every
process carrying the token, and everything in the run's pids cgroup when it has one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from course_utils.grading import sandbox
from course_utils.grading.sandbox import GiB
from course_utils.processes import kill_session

MAX_FILE_BYTES = 2**30  # RLIMIT_FSIZE of the grading processes: no file written may exceed 1 GiB
MAX_RECORD_BYTES = 20 * 2**20  # what is read of a run's record (a flood of lines stops there)
LOG_TAIL = 20_000  # characters of each run's pytest log that are kept


_RUNNING: dict[int, tuple] = {}  # pid -> (pytest or bwrap process, token, pids cgroup or None)


def kill_running() -> None:
    """Kill every grading run still going (the grader was interrupted)."""
    for proc, token, group in list(_RUNNING.values()):
        _kill_tree(proc, token, group)


@dataclass(frozen=True)
class Limits:
    timeout: float = 600  # seconds for the whole notebook, kernel start included
    cell_timeout: float = 120  # seconds per cell
    threads: int = 1  # OMP/MKL threads of each grading kernel
    sandbox: bool = True  # in the bubblewrap sandbox; False: as the grader's user (course check)
    max_procs: int = 512  # processes and threads at once (sandbox; 0: no limit)
    max_memory: int = 8 * GiB  # bytes of address space per process, RLIMIT_AS (sandbox; 0: none)
    max_file_size: int = MAX_FILE_BYTES  # bytes per file written, RLIMIT_FSIZE
    max_disk: int = 2 * GiB  # bytes of the sandbox's writable tmpfs (and of its /dev/shm)
    cpu_time: int = 0  # CPU seconds per process, RLIMIT_CPU (sandbox; 0: no limit)

    def describe(self) -> str:
        """The gradebook's `sandbox` column: what bounded each run."""
        if not self.sandbox:
            return "none"
        cpu = f"{self.cpu_time} s" if self.cpu_time else "no limit"
        return (
            f"bubblewrap, no network; processes {self.max_procs or 'no limit'} "
            f"({sandbox.process_cap_kind(self.max_procs)}), "
            f"memory {sandbox.format_size(self.max_memory)}, "
            f"file {sandbox.format_size(self.max_file_size)}, "
            f"disk {sandbox.format_size(self.max_disk)}, CPU {cpu}"
        )


@dataclass
class Run:
    records: dict[int, dict]  # code cell number -> what nbval_record wrote
    timed_out: bool  # the per-notebook limit was hit
    returncode: int | None
    log: str


def _environment(work: Path, token: str, threads: int) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(work),
        "TMPDIR": str(work / "tmp"),
        **sandbox.run_variables(token, threads),
    }


def _victims(proc: subprocess.Popen, token: str) -> list:
    """pytest's descendants and every process carrying the run's token, except this one."""
    import psutil

    victims = []
    try:
        victims = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        pass
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and p.environ().get("COURSE_GRADE_RUN") == token:
                victims.append(p)
        except psutil.Error:
            continue
    return [p for p in victims if _alive(p)]


def _alive(p) -> bool:
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill_tree(proc: subprocess.Popen, token: str, group=None) -> None:
    """Kill pytest, its kernel and anything they started (found by an environment variable,
    and by the run's pids cgroup when it has one).

    Scans again after each round: a process may start a child while its parent is being killed.
    """
    import psutil

    if group is not None:
        group.kill_all()
    for _ in range(5):
        victims = _victims(proc, token)
        if not victims:
            break
        for p in victims:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(victims, timeout=1)
    kill_session(proc)  # whatever is left in the run's own session
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _pytest_command(notebook: str, record: str, ini: str, cell_timeout: float) -> list[str]:
    """pytest --nbval on `notebook`, with the record and kernel-watch plugins; paths as the run
    sees them."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "course_utils.grading.nbval_record",
        "-p",
        "course_utils.grading.kernel_watch",
        "-p",
        "no:cacheprovider",
        "-c",
        ini,
        "--rootdir",
        os.path.dirname(notebook),
        "-o",
        "addopts=",
        "-q",
        "--tb=line",
        "--color=no",
        "--nbval",
        "--nbval-current-env",
        f"--nbval-cell-timeout={cell_timeout:g}",
        "--course-record",
        record,
        notebook,
    ]
    return cmd


def _unsandboxed(notebook: Path, limits: Limits, private: Path, token: str):
    """Command and environment of a run as the grader's user."""
    (notebook.parent / "tmp").mkdir(exist_ok=True)
    cmd = _pytest_command(
        str(notebook),
        str(private / "cells.jsonl"),
        str(private / "pytest.ini"),
        limits.cell_timeout,
    )
    return cmd, _environment(notebook.parent, token, limits.threads)


def _sandboxed(notebook: Path, limits: Limits, private: Path, token: str):
    """Command and environment of a run in the sandbox: the notebook and pytest.ini are shown
    read-only; the record file is the one host file it writes."""
    home, run = sandbox.HOME, sandbox.RUN_DIR
    files = [
        (str(notebook), f"{home}/{notebook.name}"),
        (str(private / "pytest.ini"), f"{run}/pytest.ini"),
        *sandbox.identity_files(private),
    ]
    read_only, links = sandbox.visible_paths()
    layout = sandbox.Layout(
        read_only=tuple(read_only),
        symlinks=tuple(links),
        files=tuple(files),
        writable=((str(private / "cells.jsonl"), f"{run}/cells.jsonl"),),
        env=sandbox.sandbox_env(token, limits.threads),
        max_disk=limits.max_disk,
    )
    limit = sandbox.limit_command(
        limits.max_procs,
        limits.max_memory,
        limits.max_file_size,
        limits.cpu_time,
        shutil.which("prlimit") or "prlimit",
    )
    pytest = _pytest_command(
        f"{home}/{notebook.name}",
        f"{run}/cells.jsonl",
        f"{run}/pytest.ini",
        limits.cell_timeout,
    )
    cmd = sandbox.bwrap_command(layout, limit + pytest, sandbox.find_bwrap() or "bwrap")
    return cmd, dict(os.environ, COURSE_GRADE_RUN=token)


def run_nbval(notebook: Path, limits: Limits) -> Run:
    """Run `pytest --nbval` on `notebook` within the limits; never raises.

    In the sandbox the notebook's folder is not visible: only the notebook file is.
    """
    private = Path(tempfile.mkdtemp(prefix="course-grade-private-"))
    record, log, token = private / "cells.jsonl", private / "pytest.log", uuid.uuid4().hex
    (private / "pytest.ini").write_text("[pytest]\n")
    record.touch()
    build = _sandboxed if limits.sandbox else _unsandboxed
    try:
        with sandbox.process_cap(limits.max_procs if limits.sandbox else 0) as group:
            cmd, env = build(notebook, limits, private, token)
            if group is not None:
                cmd = group.enter_command() + cmd
            timed_out, returncode = _run(cmd, env, private, log, token, limits, group)
        records = _read_records(record)
        text = log.read_bytes()[-LOG_TAIL:].decode("utf-8", errors="replace")
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return Run(records, timed_out, returncode, text)


def _run(cmd, env, cwd, log: Path, token: str, limits: Limits, group) -> tuple[bool, int | None]:
    """Start the run, wait up to the notebook's limit, kill what is left: (timed out, exit code)."""
    timed_out = False
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        _RUNNING[proc.pid] = (proc, token, group)
        if not limits.sandbox:  # in the sandbox, prlimit sets these before pytest starts
            _limit_resources(proc.pid, limits.max_file_size)
        try:
            proc.wait(timeout=limits.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_tree(proc, token, group)  # also reaps what learner code left after a normal end
            _RUNNING.pop(proc.pid, None)
    return timed_out, None if timed_out else proc.returncode


def _limit_resources(pid: int, max_file_size: int = MAX_FILE_BYTES) -> None:
    """No core dumps and no file over `max_file_size`; the kernel, started later, inherits both."""
    import psutil

    try:
        p = psutil.Process(pid)
        p.rlimit(psutil.RLIMIT_CORE, (0, 0))
        if max_file_size:
            p.rlimit(psutil.RLIMIT_FSIZE, (max_file_size, max_file_size))
    except (psutil.Error, OSError, ValueError):
        pass  # the process already ended, or limits are lower already


def _read_records(path: Path) -> dict[int, dict]:
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
