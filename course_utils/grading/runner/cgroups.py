"""A pids cgroup of one run, where RLIMIT_NPROC does not count.

RLIMIT_NPROC counts per user namespace and user, so it bounds a fork bomb in the sandbox for an
unprivileged instructor; root's processes ignore it (they stay uid 0 outside the namespace,
measured here: a fork bomb as root forked 400 of 400), so as root each run gets a cgroup of its
own with pids.max set (`process_cap`). The cgroup folder is found from the text of
/proc/self/cgroup and /proc/self/mountinfo (`pids_cgroup_candidates`, a plain function of
them), cgroup v1 or v2.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path


def nproc_counts() -> bool:
    """Whether RLIMIT_NPROC bounds the sandbox's processes: not for root, whose processes keep
    uid 0 outside the user namespace and are exempt."""
    return os.geteuid() != 0


def pids_cgroup_parent() -> Path | None:
    """A cgroup folder where this process may create a child with its own pids.max, or None."""
    candidates = pids_cgroup_candidates(
        _read(Path("/proc/self/cgroup")),
        _read(Path("/proc/self/mountinfo")),
        lambda folder: _read(folder / "cgroup.subtree_control"),
    )
    return next((c for c in candidates if os.access(c, os.W_OK)), None)


def pids_cgroup_candidates(cgroup: str, mountinfo: str, subtree_control) -> list[Path]:
    """This process's cgroup folders that can hold a child with pids.max, from the text of
    /proc/self/cgroup and /proc/self/mountinfo: its folder in a cgroup v1 pids hierarchy, and
    its cgroup v2 folder when the pids controller is enabled for children there
    (`subtree_control(folder)` reads that folder's cgroup.subtree_control)."""
    mounts = cgroup_mounts(mountinfo)
    found = []
    for line in cgroup.splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(",") and "pids" in mounts:
            found.append(Path(mounts["pids"]) / path.lstrip("/"))
        elif hierarchy == "0" and "cgroup2" in mounts:
            folder = Path(mounts["cgroup2"]) / path.lstrip("/")
            if "pids" in subtree_control(folder).split():
                found.append(folder)
    return found


def cgroup_mounts(mountinfo: str) -> dict[str, str]:
    """Mount points from /proc/self/mountinfo's text: "pids" for a cgroup v1 pids hierarchy,
    "cgroup2" for the unified one."""
    mounts = {}
    for line in mountinfo.splitlines():
        before, _, after = line.partition(" - ")
        fields, fs = before.split(), after.split()
        if len(fields) < 5 or len(fs) < 3:
            continue
        if fs[0] == "cgroup2":
            mounts.setdefault("cgroup2", fields[4])
        elif fs[0] == "cgroup" and "pids" in fs[2].split(","):
            mounts.setdefault("pids", fields[4])
    return mounts


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


class PidsCgroup:
    """A cgroup of one run with pids.max set: fork() fails in it past `max_procs` tasks."""

    def __init__(self, parent: Path, max_procs: int):
        self.path = parent / f"course-grade-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(max_procs))

    def enter_command(self) -> list[str]:
        """Prefix of the run's command: moves itself into the cgroup, then execs the rest, so
        every process the run starts is counted from the first."""
        script = 'echo $$ > "$0" && exec "$@"'
        return ["/bin/sh", "-c", script, str(self.path / "cgroup.procs")]

    def kill_all(self) -> None:
        """SIGKILL what is in the cgroup, round after round (a process may be forking, or still
        leaving: the sandbox's first process lingers a few milliseconds after the run ends)."""
        for _ in range(200):
            pids = [int(p) for p in _read(self.path / "cgroup.procs").split()]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for _ in range(50):  # the last processes may take a moment to leave
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


@contextlib.contextmanager
def process_cap(max_procs: int):
    """A `PidsCgroup` when the process limit needs one (root, see `nproc_counts`), else None."""
    parent = pids_cgroup_parent() if max_procs and not nproc_counts() else None
    group = PidsCgroup(parent, max_procs) if parent else None
    try:
        yield group
    finally:
        if group:
            group.remove()


def process_cap_kind(max_procs: int) -> str:
    """How the process limit is enforced here, for the gradebook."""
    if not max_procs:
        return "no limit"
    if nproc_counts():
        return "RLIMIT_NPROC"
    return "pids cgroup" if pids_cgroup_parent() else "not enforced"
