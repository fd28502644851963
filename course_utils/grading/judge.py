"""The judge: one process per graded notebook that decides every verdict, outside the learner's
reach. It runs the checkers, draws the held-out cases and writes the verdicts; it runs no code of
the learner's, and it reads their answers only as plain data (grading/answers.py, wire.py).

    python -m course_utils.grading.judge SOCKET VERDICTS [--seed N] [--timeout S]

It listens on the Unix socket SOCKET, which `course grade` shows inside the run (and nothing
else of its own). Each check cell of the notebook connects, names its exercise and what it
passed; the judge runs the checker with one proxy per answer, whose calls the kernel answers
(`answers.serve`), then, with a seed, the exercise's held-out cases on the same proxies. It
appends the verdict to VERDICTS (a file outside the run) and sends the kernel the visible
verdict, which the check cell prints. What the notebook prints or writes decides nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

from course_utils.grading import answers, exercises

READY = "judge: ready"  # its first line on stdout, once the socket listens
ORPHAN_POLL = 2.0  # seconds between looks at whether the grader that started it still lives


def judge_connection(
    conn: socket.socket, seed: int | None, timeout: float, record=lambda line: None
) -> dict | None:
    """One check: the verdict as written to VERDICTS, or None when the kernel asked nothing.
    `record` writes the verdict before the kernel hears it: a grader that ends the judge once
    the notebook ended cannot lose a verdict the kernel already printed."""
    conn.settimeout(timeout)
    try:
        opening, _ = answers.receive(conn)
    except (ConnectionError, OSError):
        return None
    exercise_id = str(opening.get("exercise", ""))
    if opening.get("op") != "check" or not exercises.EXERCISE_ID.match(exercise_id):
        return None
    described = opening.get("answers") if isinstance(opening.get("answers"), list) else []
    session = answers.SocketSession(conn, timeout)
    proxies = [
        answers.Answer(session, i, str(d.get("type", "object")), bool(d.get("callable")))
        for i, d in enumerate(a for a in described if isinstance(a, dict))
    ]
    try:
        result = exercises.run_check(exercise_id, *proxies)
        held = (
            exercises.run_held_out(exercise_id, seed, *proxies) if result.passed and seed else None
        )
    except (ConnectionError, OSError) as e:
        line = verdict_line(exercise_id, exercises.FAILED, f"the kernel stopped answering: {e}")
        record(line)
        return line
    line = verdict_line(result.exercise_id, result.verdict, result.message, held)
    record(line)
    try:
        answers.send(conn, {"op": "verdict", "verdict": result.verdict, "message": result.message})
    except OSError:
        pass  # the kernel went away after answering: the verdict stands
    return line


def verdict_line(exercise_id: str, verdict: str, message: str, held=None) -> dict:
    line = {"exercise": exercise_id, "verdict": verdict, "message": message}
    if held is not None:
        line.update(held_out=held.cases, held_out_passed=held.passed, failures=list(held.failures))
    return line


def serve(path: Path, verdicts: Path, seed: int | None, timeout: float) -> None:
    """Listen on `path` until killed, or until the process that started it is gone (a grader
    killed with SIGKILL cannot end its judge); one check per connection, its verdict appended."""
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o666)  # the run may be another user, inside the sandbox
    server.listen(4)
    server.settimeout(ORPHAN_POLL)
    parent = os.getppid()
    print(READY, flush=True)
    while True:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the grader was killed: nobody will read a verdict
                return
            continue
        conn.settimeout(None)
        with conn:
            judge_connection(conn, seed, timeout, lambda line: _append(verdicts, line))


def _append(verdicts: Path, line: dict) -> None:
    with open(verdicts, "a", encoding="utf-8") as f:  # the judge's own log, outside the run
        f.write(json.dumps(line) + "\n")


def read_verdicts(path: Path) -> dict[str, dict]:
    """The judge's last verdict per exercise (a line that is not one is passed over)."""
    found = {}
    if not path.exists():
        return found
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            line = json.loads(text)
            found[str(line["exercise"])] = line
        except (ValueError, KeyError, TypeError):
            continue
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("socket", type=Path, help="the Unix socket to listen on")
    parser.add_argument("verdicts", type=Path, help="where each verdict is appended (JSON lines)")
    parser.add_argument("--seed", type=int, default=None, help="the held-out cases' seed")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for one check")
    args = parser.parse_args(argv)
    exercises.registry()  # import every checker (and torch) before the first check arrives
    serve(args.socket, args.verdicts, args.seed, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
