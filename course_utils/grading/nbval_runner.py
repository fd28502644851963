"""Run `pytest --nbval` on one notebook in a subprocess, within time limits, and read the results.

The subprocess starts in a new session with its own environment: HOME and TMPDIR in the
notebook's folder, a unique COURSE_GRADE_RUN token, OMP/MKL threads set. At the notebook's time
limit, or when it ends, every process of the run is killed: pytest's descendants and every
process carrying the token (what learner code started and left behind). No file it writes may
exceed MAX_FILE_BYTES and it dumps no core. This bounds a run; it is not a sandbox (README,
"Grading").
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

from course_utils.processes import kill_session

MAX_FILE_BYTES = 2**30  # RLIMIT_FSIZE of the grading processes: no file written may exceed 1 GiB
LOG_TAIL = 20_000  # characters of each run's pytest log that are kept


_RUNNING: dict[int, tuple[subprocess.Popen, str]] = {}  # pid -> (pytest process, token)


def kill_running() -> None:
    """Kill every grading run still going (the grader was interrupted)."""
    for proc, token in list(_RUNNING.values()):
        _kill_tree(proc, token)


@dataclass(frozen=True)
class Limits:
    timeout: float = 600  # seconds for the whole notebook, kernel start included
    cell_timeout: float = 120  # seconds per cell
    threads: int = 1  # OMP/MKL threads of each grading kernel


@dataclass
class Run:
    records: dict[int, dict]  # code cell number -> what nbval_record wrote
    timed_out: bool  # the per-notebook limit was hit
    returncode: int | None
    log: str


def _environment(work: Path, token: str, threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HOME=str(work),
        TMPDIR=str(work / "tmp"),
        MPLBACKEND="Agg",
        PYTHONDONTWRITEBYTECODE="1",
        COURSE_GRADE_RUN=token,
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
    )
    return env


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


def _kill_tree(proc: subprocess.Popen, token: str) -> None:
    """Kill pytest, its kernel and anything they started (found by an environment variable).

    Scans again after each round: a process may start a child while its parent is being killed.
    """
    import psutil

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


def run_nbval(notebook: Path, limits: Limits, sanitize: Path | None = None) -> Run:
    """Run `pytest --nbval` on `notebook` (in its folder) within the limits; never raises."""
    private = Path(tempfile.mkdtemp(prefix="course-grade-private-"))
    record, log, token = private / "cells.jsonl", private / "pytest.log", uuid.uuid4().hex
    (private / "pytest.ini").write_text("[pytest]\n")
    (notebook.parent / "tmp").mkdir(exist_ok=True)
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
        str(private / "pytest.ini"),
        "--rootdir",
        str(notebook.parent),
        "-o",
        "addopts=",
        "-q",
        "--tb=line",
        "--color=no",
        "--nbval",
        "--nbval-current-env",
        f"--nbval-cell-timeout={limits.cell_timeout:g}",
        "--course-record",
        str(record),
        str(notebook),
    ]
    if sanitize and sanitize.is_file():
        cmd[-1:-1] = ["--nbval-sanitize-with", str(sanitize)]
    timed_out = False
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=private,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=_environment(notebook.parent, token, limits.threads),
        )
        _RUNNING[proc.pid] = (proc, token)
        _limit_resources(proc.pid)
        try:
            proc.wait(timeout=limits.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_tree(proc, token)  # also reaps what learner code left running after a normal end
            _RUNNING.pop(proc.pid, None)
    records = _read_records(record)
    text = log.read_bytes()[-LOG_TAIL:].decode("utf-8", errors="replace")
    shutil.rmtree(private, ignore_errors=True)
    return Run(records, timed_out, None if timed_out else proc.returncode, text)


def _limit_resources(pid: int) -> None:
    """No core dumps and no file over MAX_FILE_BYTES; the kernel, started later, inherits both."""
    import psutil

    try:
        p = psutil.Process(pid)
        p.rlimit(psutil.RLIMIT_CORE, (0, 0))
        p.rlimit(psutil.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    except (psutil.Error, OSError, ValueError):
        pass  # the process already ended, or limits are lower already


def _read_records(path: Path) -> dict[int, dict]:
    records = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
                records[int(rec["cell"])] = rec
            except (ValueError, KeyError, TypeError):
                continue
    return records
