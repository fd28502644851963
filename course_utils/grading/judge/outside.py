"""What the judge sees of the learner's process from outside it: facts the learner cannot report.

The learner's kernel is known by its process id (the peer of the check's connection, as the
judge's own /proc numbers it). From there, with no help from the kernel:
    files        the kernel's file system through /proc/PID/root: folders the judge makes there
                 for a check, the bytes a check's call left in them;
    renames      Linux's inotify on such a folder: every open, write, close and rename in it,
                 in order, as the file system saw them (06.2: a rename of a complete file);
    processes    the kernel's descendants in /proc, polled while a check runs: their command
                 lines and parents (06.4: the program started twice);
    witnesses    reports of the course's programs (course_utils.witness), taken only from a
                 process recognised here as the expected program, started by the kernel, with
                 an environment that cannot run code of the learner's before the program's
                 (06.4: the signal that stopped a run, the step it resumed from).
Outside `course grade` (a notebook checked in its own kernel) the same reads apply to this very
process, whose checker then stands in for the judge.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import socket
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import messages, witness

POLL = 0.02  # seconds between looks at the kernel's processes during a check


def peer_pid(conn: socket.socket) -> int:
    """The process id of the other end of a Unix socket, as this process's /proc numbers it."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[0]


def environ_of(pid: int) -> dict[str, str]:
    """The environment `pid` started with (empty where it cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def command_line(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [word.decode(errors="replace") for word in raw.split(b"\0")[:-1]]


def parent_of(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def descends_from(pid: int, ancestor: int) -> bool:
    seen = set()
    while pid and pid not in seen:
        if pid == ancestor:
            return True
        seen.add(pid)
        pid = parent_of(pid) or 0
    return False


def descendants(pid: int) -> set[int]:
    """The processes below `pid` now, from Linux's /proc/PID/task/TID/children lists."""
    found, todo = set(), [pid]
    while todo:
        for listing in Path(f"/proc/{todo.pop()}/task").glob("*/children"):
            try:
                children = [int(word) for word in listing.read_text().split()]
            except (OSError, ValueError):  # the process ended meanwhile
                continue
            todo += [child for child in children if child not in found]
            found.update(children)
    return found


# ---- files, through the kernel's own root --------------------------------------------------------


@dataclass
class Outside:
    """The learner's process `pid` seen from outside; `witnesses` holds what the course's
    programs it started reported during the current check (the judge fills it)."""

    pid: int
    witnesses: list[dict] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # why each other report was not taken
    expects: str | None = None  # the program whose reports the check takes now

    def path(self, inside: str | os.PathLike) -> Path:
        """Where the file the kernel calls `inside` is for this process."""
        if self.pid == os.getpid():
            return Path(inside)
        return Path(f"/proc/{self.pid}/root") / str(inside).lstrip("/")

    @contextlib.contextmanager
    def folder(self, prefix: str):
        """A new, empty folder the kernel can write in (under its TMPDIR), made from here; its
        path as the kernel names it. Removed when the block ends."""
        base = environ_of(self.pid).get("TMPDIR") or "/tmp"
        inside = f"{base.rstrip('/')}/{prefix}{uuid.uuid4().hex[:10]}"
        self.path(inside).mkdir(mode=0o700)
        try:
            yield inside
        finally:
            shutil.rmtree(self.path(inside), ignore_errors=True)

    def read_bytes(self, inside: str | os.PathLike) -> bytes | None:
        try:
            return self.path(inside).read_bytes()
        except OSError:
            return None

    @contextlib.contextmanager
    def file_events(self, folder: str):
        """What happens to the files of `folder` while the block runs: a list, filled when the
        block ends, of (event, name, cookie) in the order the file system saw them."""
        events: list[tuple[str, str, int]] = []
        with _Inotify(self.path(folder)) as watch:
            yield events
            events += watch.read()

    @contextlib.contextmanager
    def processes(self):
        """The kernel's descendants seen while the block runs: {pid: command line}."""
        seen: dict[int, list[str]] = {}
        done = threading.Event()

        def look():
            for pid in descendants(self.pid):
                if pid not in seen:
                    seen[pid] = command_line(pid)

        def watch():
            while not done.wait(POLL):
                look()

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        try:
            yield seen
        finally:
            done.set()
            thread.join()
            look()

    @contextlib.contextmanager
    def witnessing(self, program: str):
        """Reports of `program` (a module run with `-m`) while the block runs, in `witnesses`.
        In the judge its door already takes them; in this very process, a door of its own."""
        self.expects = program
        try:
            if self.pid != os.getpid():
                yield self.witnesses
            else:
                with _local_door(self):
                    yield self.witnesses
        finally:
            self.expects = None


# ---- a report, and whether its sender is the program it says --------------------------------


# Variables that make Python or the loader run other code before the program's own.
_INJECTING = ("PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONINSPECT", "PYTHONWARNINGS")


def not_the_program(pid: int, kernel: int, program: str) -> str | None:
    """Why process `pid` is not `python -m program` started by `kernel` with nothing of the
    learner's run before it; None when it is."""
    if pid == kernel:
        return "records written from this kernel: run the program, do not train or write them here"
    if not descends_from(pid, kernel):
        return "records of a process the learner's kernel did not start"
    words = command_line(pid)
    if words[1:3] != ["-m", program]:
        return f"its command is {' '.join(words[:4])!r}, not python -m {program}"
    try:
        exe = os.path.realpath(f"/proc/{pid}/exe")
    except OSError:
        exe = ""
    if os.path.basename(exe) != os.path.basename(os.path.realpath(sys.executable)):
        return f"it runs {exe or 'an unknown program'}, not the course's Python"
    mine, theirs = environ_of(kernel), environ_of(pid)
    changed = [
        name
        for name in sorted(set(mine) | set(theirs))
        if (name.startswith("LD_") or name in _INJECTING or name == "PYTHONPATH")
        and mine.get(name) != theirs.get(name)
    ]
    if changed:
        return f"its environment sets {', '.join(changed)} differently from the kernel's"
    root = Path(f"/proc/{pid}/root")
    home = theirs.get("HOME", "/nonexistent").lstrip("/")
    cwd = Path(f"/proc/{pid}/cwd")
    shadows = [
        cwd / program.split(".")[0],
        cwd / "sitecustomize.py",
        cwd / "usercustomize.py",
        root / home / ".local" / "lib",
    ]
    found = [p.name for p in shadows if p.exists()]
    if found:
        return f"code of the learner's could run before it ({', '.join(found)})"
    return None


def take_report(conn: socket.socket, header: dict, outside: Outside | None) -> None:
    """Answer one witness report on `conn`: kept in `outside.witnesses` when the check running
    now expects that program's reports and the sender is that program, else refused with why."""
    pid = peer_pid(conn)
    program = outside.expects if outside is not None else None
    why = "no check expects a report now" if program is None else None
    why = why or not_the_program(pid, outside.pid, program)
    if why is None and header.get("program") != program:
        why = f"the check expects reports of {program}, not of {header.get('program')}"
    if why is None:
        fields = header.get("fields") if isinstance(header.get("fields"), dict) else {}
        outside.witnesses.append({**fields, "event": str(header.get("event")), "pid": pid})
    elif outside is not None:
        outside.refused.append(why)
    reply = {"op": "taken"} if why is None else {"op": "refused", "why": why}
    with contextlib.suppress(OSError):
        messages.send(conn, reply)


@contextlib.contextmanager
def _local_door(outside: Outside):
    """A witness door in this process: a socket of its own, named in COURSE_WITNESS for the
    processes started while the block runs."""
    folder = Path(os.environ.get("TMPDIR") or "/tmp") / f"course-witness-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o700)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(folder / "door"))
    server.listen(8)
    server.settimeout(0.1)
    done = threading.Event()

    def serve():
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(witness.TIMEOUT)
                with contextlib.suppress(OSError, ConnectionError):
                    header, _ = messages.receive(conn)
                    take_report(conn, header, outside)

    thread = threading.Thread(target=serve, daemon=True)
    before = os.environ.get(witness.VARIABLE)
    os.environ[witness.VARIABLE] = str(folder / "door")
    thread.start()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(witness.VARIABLE, None)
        else:
            os.environ[witness.VARIABLE] = before
        time.sleep(0.05)  # a report sent just before the call returned
        done.set()
        thread.join()
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


# ---- inotify ------------------------------------------------------------------------------------

_EVENTS = {
    0x002: "modified",
    0x008: "closed after writing",
    0x020: "opened",
    0x040: "moved from",
    0x080: "moved to",
    0x100: "created",
    0x200: "deleted",
}
_HEADER = struct.Struct("iIII")


class _Inotify:
    """Linux's inotify on one folder, through libc (no package needed)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def __enter__(self) -> _Inotify:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        mask = sum(_EVENTS)
        if libc.inotify_add_watch(self.fd, os.fsencode(self.folder), mask) < 0:
            errno = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(errno, f"cannot watch {self.folder}")
        return self

    def read(self) -> list[tuple[str, str, int]]:
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.fd, 65536):
                data += chunk
        found, offset = [], 0
        while offset + _HEADER.size <= len(data):
            _, mask, cookie, length = _HEADER.unpack_from(data, offset)
            raw = data[offset + _HEADER.size : offset + _HEADER.size + length]
            name = raw.split(b"\0", 1)[0].decode(errors="replace")
            offset += _HEADER.size + length
            found += [(what, name, cookie) for bit, what in _EVENTS.items() if mask & bit]
        return found

    def __exit__(self, *exc) -> None:
        os.close(self.fd)
