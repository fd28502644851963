"""launching.run_programs for real: each task a process of its own, forked from the warm server,
with its own environment and nothing else, its output in the log; a failing rank stops the
others, and the timeout stops them all."""

import multiprocessing.forkserver
import os
import textwrap
import time

import psutil
import pytest

from course_utils import launching

PROGRAM = """\
import os, sys, time

what = sys.argv[1]
print(f"rank {os.environ['RANK']} pid {os.getpid()} argv {sys.argv[1:]} "
      f"inherited {os.environ.get('ONLY_IN_THE_CALLER', '-')}")
if what == "fail" and os.environ["RANK"] == "1":
    sys.exit(3)
if what == "sleep" or (what == "fail" and os.environ["RANK"] != "1"):
    time.sleep(120)
if what == "leave":  # a rank that leaves a process running behind it
    import subprocess
    print("left", subprocess.Popen(["sleep", "300"]).pid, flush=True)
"""


@pytest.fixture
def program(tmp_path, monkeypatch):
    """A module `rank_program` the forked ranks can import (they get this sys.path)."""
    (tmp_path / "rank_program.py").write_text(textwrap.dedent(PROGRAM))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ONLY_IN_THE_CALLER", "leaked")
    return "rank_program"


def _tasks(module, what, ranks):
    return [
        launching.Task(module, (what,), {"RANK": str(r), "PATH": os.environ["PATH"]})
        for r in range(ranks)
    ]


def test_each_rank_is_its_own_process_with_only_its_environment(program, tmp_path):
    log = tmp_path / "run.log"
    assert launching.run_programs(_tasks(program, "ok", 3), log, timeout=60) == 0
    lines = sorted(line for line in log.read_text().splitlines() if line.startswith("rank "))
    assert [line.split()[1] for line in lines] == ["0", "1", "2"]
    pids = {int(line.split()[3]) for line in lines}
    assert len(pids) == 3 and os.getpid() not in pids
    assert all("argv ['ok'] inherited -" in line for line in lines), lines


def test_a_failing_rank_stops_the_others(program, tmp_path):
    log = tmp_path / "run.log"
    start = time.monotonic()
    assert launching.run_programs(_tasks(program, "fail", 3), log, timeout=100) == 3
    assert time.monotonic() - start < 60  # the two sleepers were killed, not waited for
    assert "local launch: rank 1 ended with exit code 3; stopped the others" in log.read_text()


def test_the_timeout_ends_every_rank(program, tmp_path):
    log = tmp_path / "run.log"
    assert launching.run_programs(_tasks(program, "sleep", 2), log, timeout=3) == -9
    assert "local launch: killed the ranks after the timeout of 3 s" in log.read_text()


def test_an_exception_is_a_failure_with_its_traceback(tmp_path):
    log = tmp_path / "run.log"
    tasks = [launching.Task("course_utils.no_such_module", (), {"PATH": os.environ["PATH"]})]
    assert launching.run_programs(tasks, log, timeout=60) == 1
    assert "No module named course_utils.no_such_module" in log.read_text()


def test_the_server_has_imported_torch(tmp_path, monkeypatch):
    """The point of the fork server: a rank starts with torch already imported."""
    probe = tmp_path / "probe.py"
    probe.write_text("import sys\nprint('torch preloaded:', 'torch._dynamo' in sys.modules)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    log = tmp_path / "run.log"
    tasks = [launching.Task("probe", (), {"PATH": os.environ["PATH"]})]
    assert launching.run_programs(tasks, log, timeout=120) == 0
    assert "torch preloaded: True" in log.read_text()


def test_a_preloaded_program_runs_as_python_m_runs_it(tmp_path):
    # a new server, so that it preloads the program (the standard library's own tests stop it so)
    multiprocessing.forkserver._forkserver._stop()
    log = tmp_path / "run.log"
    program = "course_utils.jobs.lab_staging"  # importable by the server: an installed package
    tasks = [launching.Task(program, ("--help",), {"PATH": os.environ["PATH"]})]
    assert launching.run_programs(tasks, log, timeout=120, preload=(program,)) == 0
    said = log.read_text()
    assert "usage:" in said and "Warning" not in said, said


def test_what_a_rank_left_running_ends_with_it(program, tmp_path):
    log = tmp_path / "run.log"
    assert launching.run_programs(_tasks(program, "leave", 1), log, timeout=60) == 0
    (left,) = [
        int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("left")
    ]
    time.sleep(0.5)
    assert not psutil.pid_exists(left) or psutil.Process(left).status() == psutil.STATUS_ZOMBIE
