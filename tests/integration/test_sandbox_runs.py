"""The grading sandbox for real: a fork bomb meets its limit (as root and as an unprivileged
user), and nothing of a run outlives a grader that is killed.

tests/integration/test_grader.py grades adversarial submissions in it; these check the two
mechanisms that a gradebook cannot show.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import nbformat
import psutil
import pytest

from course_utils.grading.runner import cgroups, sandbox
from course_utils.grading.runner.limits import MiB
from course_utils.paths import REPO_ROOT

pytestmark = pytest.mark.bwrap

FORK_COUNT = """
import os, time
children, error = 0, None
for _ in range(400):
    try:
        pid = os.fork()
    except OSError as e:
        error = e.strerror
        break
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    children += 1
print(children, error, flush=True)
"""
MAX_PROCS = 32


def fork_count(prefix: list[str], python: str, group=None) -> tuple[int, str]:
    """(children forked, the error that stopped it) in a sandbox with MAX_PROCS processes."""
    read_only, links = sandbox.system_layout()
    if python == sys.executable:
        read_only += sandbox.python_paths()
    layout = sandbox.Layout(
        read_only=tuple(read_only),
        symlinks=tuple(links),
        env={"PATH": "/usr/bin:/bin"},
        max_disk=16 * MiB,
    )
    limits = sandbox.limit_command(MAX_PROCS, 0, 0, 10, shutil.which("prlimit"))
    command = sandbox.bwrap_command(layout, limits + [python, "-c", FORK_COUNT])
    enter = group.enter_command() if group else []
    done = subprocess.run(prefix + enter + command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    children, error = done.stdout.split(maxsplit=1)
    return int(children), error.strip()


def test_a_fork_bomb_as_root_meets_the_pids_cgroup():
    if os.geteuid() != 0:
        pytest.skip("runs as root: the pids cgroup is root's process limit")
    with cgroups.process_cap(MAX_PROCS) as group:
        assert group is not None, "as root, the sandbox needs a writable pids cgroup"
        children, error = fork_count([], sys.executable, group)
    assert children < MAX_PROCS and error == "Resource temporarily unavailable"


def test_a_fork_bomb_as_an_unprivileged_user_meets_rlimit_nproc():
    """As root, the user `nobody` (setpriv) runs the sandbox with the system's Python."""
    prefix, python = [], sys.executable
    if os.geteuid() == 0:
        if not (shutil.which("setpriv") and os.path.exists("/usr/bin/python3")):
            pytest.skip("needs setpriv and /usr/bin/python3 to run as nobody")
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        python = "/usr/bin/python3"  # root's own Python may sit in /root, closed to nobody
    children, error = fork_count(prefix, python)
    assert children < MAX_PROCS and error == "Resource temporarily unavailable"


GRADER = """
import sys
from pathlib import Path
from course_utils.grading.runner.limits import Limits
from course_utils.grading.runner.nbval_runner import run_nbval
run_nbval(Path(sys.argv[1]), Limits(timeout=120, cell_timeout=100, max_procs=0))
"""


def test_nothing_outlives_a_killed_grader(tmp_path):
    """SIGKILL the grader mid-run: bwrap --die-with-parent and the PID namespace end the kernel
    and a process it started in a session of its own."""
    marker = f"300.{os.getpid()}{time.monotonic_ns() % 10**6}"
    notebook = tmp_path / "work" / "nb.ipynb"
    notebook.parent.mkdir()
    source = (
        f"import subprocess, time\nsubprocess.Popen(['sleep', {marker!r}], "
        "start_new_session=True, env={})\ntime.sleep(300)"
    )
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), notebook)
    grader = subprocess.Popen(
        [sys.executable, "-c", GRADER, str(notebook)],
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), TMPDIR=str(tmp_path)),  # its leftovers
    )
    try:
        assert wait_for(lambda: sleepers(marker), 60), "the notebook's child never started"
        grader.send_signal(signal.SIGKILL)
        grader.wait()
        assert wait_for(lambda: not sleepers(marker), 10), "a process of the run survived"
    finally:
        grader.kill()
        for p in sleepers(marker):
            p.kill()


def sleepers(marker: str) -> list:
    found = []
    for p in psutil.process_iter():
        try:
            if p.cmdline() == ["sleep", marker] and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


HIDDEN_PROBE = """
import importlib, json, os
import course_utils
found = {}
for name in NAMES:
    try:
        importlib.import_module(name)
        found[name] = "imported"
    except ImportError as e:
        found[name] = type(e).__name__
package = os.path.dirname(course_utils.__file__)
found["checks/"] = sorted(os.listdir(os.path.join(package, "grading", "checks")))
found["judge/"] = sorted(os.listdir(os.path.join(package, "grading", "judge")))
print(json.dumps(found))
"""


def test_a_graded_run_cannot_import_the_checkers_nor_read_a_reference(tmp_path):
    """From inside the sandbox, as a learner's cell would look: the checkers, their references,
    the judge's own side and the grader are not there; the kernel's end and the probes are."""
    from course_utils.grading.judge.beside import hidden_in_runs
    from course_utils.grading.runner import nbval_runner
    from course_utils.grading.runner.limits import default_limits

    hidden = [
        "course_utils.grading.checks.lesson01",
        "course_utils.grading.checks.lesson06_resume",
        "course_utils.grading.checks.lesson09_references",
        "course_utils.grading.judge.process",
        "course_utils.grading.judge.outside",
        "course_utils.grading.grader.plan",
    ]
    shown = ["course_utils.grading.judge.kernel", "course_utils.grading.probes.lesson01"]
    source = f"NAMES = {hidden + shown!r}\n" + HIDDEN_PROBE
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    limits = default_limits(120, jobs=1, sandbox=True)
    run = nbval_runner.run_notebook(notebook, "look.ipynb", limits, masked=hidden_in_runs())
    found = json.loads(run.records[0]["stdout"])
    assert {name: found[name] for name in hidden} == dict.fromkeys(hidden, "ModuleNotFoundError")
    assert {name: found[name] for name in shown} == dict.fromkeys(shown, "imported")
    assert found["checks/"] == []
    assert found["judge/"] == ["__init__.py", "evidence.py", "kernel.py", "proxies.py", "wire.py"]
