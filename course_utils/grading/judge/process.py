"""The judge process: one per graded notebook, outside the learner's reach, deciding every verdict.

    python -m course_utils.grading.judge.process SOCKET VERDICTS --runner-fd N
        [--lesson NN ...] [--seed S] [--timeout T]

It imports the checkers of the lessons it judges, then listens on the Unix socket SOCKET (the
one door the sandboxed run is shown) and on descriptor N, its end of a socket pair whose other
end only the runner holds. The runner says when a check cell starts and ends (runner/
announce.py). A knock on the door is a check only when it names the exercise whose check cell
runs now, comes from the kernel, and is the first of that cell; any other knock is refused and
written down, and the grader flags it. For a check it takes, the judge runs the checker on one
proxy per answer (`KernelSession`: every call crosses to the kernel as plain data), then, with a
seed, the held-out cases; it appends the verdict to VERDICTS (outside the run) before the kernel
hears it. While a check runs, the door also takes reports of the course's programs that the
checker expects (outside.py). What the notebook prints or writes decides nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import messages
from course_utils.grading import exercises
from course_utils.grading.judge import outside, proxies, wire
from course_utils.grading.judge.beside import READY

ORPHAN_POLL = 2.0  # seconds between looks at whether the grader that started it still lives
OPENING_WAIT = 30.0  # seconds a connection may take to say what it is


@dataclass
class Doors:
    """What the runner said (the check cell running now, the kernel's id as the run numbers
    it), which cells already had their check, and the check being judged now."""

    running: str | None = None
    kernel: int | None = None
    judged: set[str] = field(default_factory=set)
    current: outside.Outside | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, exercise_id: str, pid: int) -> str | None:
        """Why a knock for `exercise_id` from process `pid` is refused; None when it is the
        check of the cell running now (it is then that cell's one check)."""
        with self.lock:
            if self.running != exercise_id:
                return f"a check of {exercise_id} that no check cell asked for"
            if exercise_id in self.judged:
                return f"a second check of {exercise_id} in its check cell"
            if self.kernel is not None and innermost_pid(pid) != self.kernel:
                return f"a check of {exercise_id} from a process other than the kernel"
            self.judged.add(exercise_id)
            return None


def innermost_pid(pid: int) -> int | None:
    """`pid`'s number in its own PID namespace (the sandbox's), from /proc/PID/status."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return pid


class KernelSession:
    """The judge's end of a check's connection: each request goes to the learner's kernel,
    which answers it (kernel.py); `outside()` is that kernel seen from here."""

    quiet = False

    def __init__(self, conn: socket.socket, timeout: float, seen: outside.Outside):
        self.conn, self.seen = conn, seen
        self.conn.settimeout(timeout)

    def request(self, header: dict, payload):
        messages.send(self.conn, {**header, "quiet": self.quiet}, wire.encode(payload))
        reply, data = messages.receive(self.conn)
        return proxies.from_reply(reply, data if reply.get("op") == "result" else b"")

    def outside(self) -> outside.Outside:
        return self.seen


def judge_check(
    conn: socket.socket, opening: dict, seen: outside.Outside, seed, timeout: float, record
) -> dict:
    """One check the doors let in: the verdict as written to VERDICTS. `record` writes it before
    the kernel hears it: a grader that ends the judge once the notebook ended cannot lose a
    verdict the kernel already printed."""
    exercise_id = str(opening["exercise"])
    described = opening.get("answers") if isinstance(opening.get("answers"), list) else []
    session = KernelSession(conn, timeout, seen)
    proxies_ = [
        proxies.Answer(session, i, str(d.get("type", "object")), bool(d.get("callable")))
        for i, d in enumerate(a for a in described if isinstance(a, dict))
    ]
    try:
        result = exercises.run_check(exercise_id, *proxies_)
        held = (
            exercises.run_held_out(exercise_id, seed, *proxies_) if result.passed and seed else None
        )
    except (ConnectionError, OSError) as e:
        line = verdict_line(exercise_id, exercises.FAILED, f"the kernel stopped answering: {e}")
        record(line)
        return line
    line = verdict_line(result.exercise_id, result.verdict, result.message, held)
    record(line)
    with contextlib.suppress(OSError):  # the kernel went away after answering: the verdict stands
        messages.send(conn, {"op": "verdict", "verdict": result.verdict, "message": result.message})
    return line


def refuse(conn: socket.socket, exercise_id: str, why: str, record) -> None:
    record({"refused": exercise_id, "why": why})
    with contextlib.suppress(OSError):
        messages.send(
            conn, {"op": "refused", "verdict": exercises.FAILED, "message": f"not graded: {why}"}
        )


def verdict_line(exercise_id: str, verdict: str, message: str, held=None) -> dict:
    line = {"exercise": exercise_id, "verdict": verdict, "message": message}
    if held is not None:
        line.update(held_out=held.cases, held_out_passed=held.passed, failures=list(held.failures))
    return line


# ---- the doors: the runner's channel, the run's socket ------------------------------------------


def follow_runner(channel: socket.socket, doors: Doors) -> None:
    """Note each announcement of the runner's and answer it, until the channel closes."""
    while True:
        try:
            message, _ = messages.receive(channel)
        except (ConnectionError, OSError):
            return
        with doors.lock:
            if message.get("op") == "open":
                doors.running = str(message.get("exercise"))
                kernel = message.get("kernel")
                doors.kernel = kernel if type(kernel) is int else None
            elif message.get("op") == "close":
                doors.running = None
        with contextlib.suppress(OSError):
            messages.send(channel, {"op": "ok"})


def sort_knock(conn: socket.socket, doors: Doors, checks: queue.Queue) -> None:
    """Read what a new connection is: a knock goes to the main thread, a program's report is
    answered here at once (the check that expects it is busy waiting on the kernel)."""
    try:
        conn.settimeout(OPENING_WAIT)
        opening, _ = messages.receive(conn)
    except (ConnectionError, OSError):
        conn.close()
        return
    if opening.get("op") == "witness":
        with conn:
            outside.take_report(conn, opening, doors.current)
        return
    exercise_id = str(opening.get("exercise", ""))
    if opening.get("op") != "check" or not exercises.EXERCISE_ID.match(exercise_id):
        conn.close()
        return
    checks.put((conn, opening))


def accept_forever(server: socket.socket, doors: Doors, checks: queue.Queue) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=sort_knock, args=(conn, doors, checks), daemon=True).start()


def serve(server: socket.socket, channel: socket.socket, verdicts: Path, seed, timeout) -> None:
    """Judge the knocks the doors let in until killed, or until the process that started it is
    gone (a grader killed with SIGKILL cannot end its judge)."""
    doors, checks = Doors(), queue.Queue()
    threading.Thread(target=follow_runner, args=(channel, doors), daemon=True).start()
    threading.Thread(target=accept_forever, args=(server, doors, checks), daemon=True).start()
    parent = os.getppid()

    def record(line: dict) -> None:
        with open(verdicts, "a", encoding="utf-8") as f:  # the judge's own log, outside the run
            f.write(json.dumps(line) + "\n")

    while True:
        try:
            conn, opening = checks.get(timeout=ORPHAN_POLL)
        except queue.Empty:
            if os.getppid() != parent:  # the grader was killed: nobody will read a verdict
                return
            continue
        with conn:
            exercise_id, pid = str(opening["exercise"]), outside.peer_pid(conn)
            why = doors.take(exercise_id, pid)
            if why is not None:
                refuse(conn, exercise_id, why, record)
                continue
            doors.current = outside.Outside(pid)
            try:
                judge_check(conn, opening, doors.current, seed, timeout, record)
            finally:
                doors.current = None


def listen(path: Path) -> socket.socket:
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o666)  # the run may be another user, inside the sandbox
    server.listen(16)
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("socket", type=Path, help="the Unix socket to listen on")
    parser.add_argument("verdicts", type=Path, help="where each verdict is appended (JSON lines)")
    parser.add_argument("--runner-fd", type=int, required=True, help="the runner's channel")
    parser.add_argument("--lesson", action="append", help="a lesson judged (default: all)")
    parser.add_argument("--seed", type=int, default=None, help="the held-out cases' seed")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for one check")
    args = parser.parse_args(argv)
    channel = socket.socket(fileno=args.runner_fd)
    for lesson in args.lesson or [None]:
        exercises.load_checkers(lesson)  # torch and the checkers, before the first knock
    server = listen(args.socket)
    print(READY, flush=True)
    serve(server, channel, args.verdicts, args.seed, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
