"""Ending what a run started, the run's own additions to `processes`.

`processes.started` ends the run's tree (its session, and descendants that left it) when the
run ends. A submission can do more: a daemon that double-forked and called setsid is no longer
anybody's descendant. So every process of a run carries its token (COURSE_GRADE_RUN, in
`sandbox.run_variables`) and is found by it, and as root a sandboxed run has a pids cgroup
(cgroups.py) whose every process is killed. `tracked` does both when a run ends;
`kill_running` does it for every run still going when the grader is interrupted.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

import psutil

from course_utils import processes
from course_utils.grading.runner.sandbox import TOKEN

_RUNNING: dict[int, tuple] = {}  # pid -> (pytest or bwrap process, token, pids cgroup or None)


@contextlib.contextmanager
def tracked(proc: subprocess.Popen, token: str, group=None):
    """While the block runs, `kill_running` can end this run; when it ends, so do the run's
    processes that carry `token` and those in `group` (the tree is `processes.started`'s)."""
    _RUNNING[proc.pid] = (proc, token, group)
    try:
        yield proc
    finally:
        kill_marked(proc, token, group)
        _RUNNING.pop(proc.pid, None)


def kill_running() -> None:
    """End every run still going (the grader was interrupted), trees included."""
    for proc, token, group in list(_RUNNING.values()):
        kill_marked(proc, token, group)
        processes.end_tree(proc)


def kill_marked(proc: subprocess.Popen, token: str, group=None) -> None:
    """Kill the run's pids cgroup, then its descendants and every process carrying `token`,
    round after round: a process may start a child while its parent is being killed."""
    if group is not None:
        group.kill_all()
    for _ in range(5):
        victims = _victims(proc, token)
        if not victims:
            return
        for p in victims:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(victims, timeout=1)


def _victims(proc: subprocess.Popen, token: str) -> list[psutil.Process]:
    """The run's descendants and every process carrying its token, except this one."""
    victims = []
    with contextlib.suppress(psutil.Error):
        victims = psutil.Process(proc.pid).children(recursive=True)
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and p.environ().get(TOKEN) == token:
                victims.append(p)
        except psutil.Error:
            continue
    return [p for p in victims if _alive(p)]


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
