"""runner/nbval_runner: pytest --nbval in a child process, bounded in time, read per cell."""

import json
import os
import time

import nbformat
import psutil
import pytest

from course_utils.grading.runner.limits import Limits
from course_utils.grading.runner.nbval_runner import run_nbval


def _cmdline(p) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _live(p) -> bool:
    """Running, not a zombie: a killed child whose parent died waits for init to reap it."""
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def write(tmp_path, *sources):
    path = tmp_path / "work" / "nb.ipynb"
    path.parent.mkdir()
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources]), path
    )
    return path


SANDBOX = [False, pytest.param(True, marks=pytest.mark.bwrap, id="sandbox")]


@pytest.mark.slow  # waits out the 20 s limit
@pytest.mark.parametrize("sandbox", SANDBOX)
def test_notebook_time_limit_kills_the_whole_process_tree(tmp_path, sandbox):
    """A cell that sleeps past the notebook limit, with a child process that would outlive it."""
    # A duration no other process on the machine uses, so only this notebook's child matches.
    duration = f"300.{os.getpid()}{time.monotonic_ns() % 10**6}"
    path = write(
        tmp_path,
        f"import subprocess\nsubprocess.Popen(['sleep', '{duration}'])",
        "import time\ntime.sleep(300)",
    )
    start = time.perf_counter()
    run = run_nbval(path, Limits(timeout=20, cell_timeout=100, sandbox=sandbox))
    assert time.perf_counter() - start < 35
    assert run.timed_out and set(run.records) == {0}  # the first cell ran: its child exists
    deadline = time.monotonic() + 5  # a killed process may take a moment to go on a busy machine
    while True:
        sleepers = [p for p in psutil.process_iter() if _cmdline(p) == ["sleep", duration]]
        sleepers = [p for p in sleepers if _live(p)]
        if not sleepers or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not sleepers, "a process started by the notebook survived the time limit"


@pytest.mark.parametrize("sandbox", SANDBOX)
def test_records_keep_the_tail_of_long_output_and_the_run_environment(tmp_path, sandbox):
    path = write(
        tmp_path,
        "print('a' * 10000)\nprint('[01.1] passed: ok')",
        "import os, resource\n"
        "print(os.getcwd() == os.environ['HOME'], 'COURSE_GRADE_RUN' in os.environ)\n"
        "print(resource.getrlimit(resource.RLIMIT_CORE))",
    )
    run = run_nbval(path, Limits(timeout=60, cell_timeout=30, sandbox=sandbox))
    first, second = run.records[0], run.records[1]
    assert first["ok"] and first["stdout"].endswith("[01.1] passed: ok\n")
    assert "characters cut" in first["stdout"] and len(json.dumps(first)) < 10_000
    assert second["stdout"] == "True True\n(0, 0)\n"
    assert not run.timed_out and run.returncode == 0
