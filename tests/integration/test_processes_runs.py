"""course_utils.processes with real children: output, the time limit, and nothing left behind."""

import sys
import time

import psutil

from course_utils import processes

PY = sys.executable


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_run_returns_output_and_exit_code():
    done = processes.run(
        [PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
        timeout=30,
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert not done.ok and not done.timed_out and done.describe() == "exit code 3"


def test_merge_keeps_stderr_in_order_and_lines_stream():
    seen = []
    code = (
        "import sys\nfor i in range(3):\n"
        " print(i, flush=True); print('e', file=sys.stderr, flush=True)"
    )
    done = processes.run([PY, "-c", code], timeout=30, merge=True, on_line=seen.append)
    assert done.stdout == "0\ne\n1\ne\n2\ne\n" and done.stderr == ""
    assert seen == ["0\n", "e\n", "1\n", "e\n", "2\n", "e\n"]


def test_time_limit_kills_the_whole_tree_even_a_child_in_a_new_session(tmp_path):
    pids = tmp_path / "pids"
    # the child starts a grandchild that leaves the session (setsid), then both sleep
    code = (
        "import os, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True)\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{p.pid}}')\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    done = processes.run([PY, "-c", code], timeout=3)
    assert done.timed_out and done.returncode is None and "started" in done.stdout
    assert time.monotonic() - start < 20
    child, grandchild = map(int, pids.read_text().split())
    time.sleep(0.2)
    assert not _alive(child) and not _alive(grandchild)


def test_started_ends_the_tree_when_the_block_raises(tmp_path):
    try:
        with processes.started([PY, "-c", "import time; time.sleep(60)"]) as proc:
            pid = proc.pid
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert not _alive(pid)
