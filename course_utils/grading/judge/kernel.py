"""The kernel's end of a check: knock on the judge's door, answer its requests, hear its verdict.

`check` (exercises.py) calls `ask` where the judge's socket is set (COURSE_JUDGE, in `course
grade` and `course check`). This is course code running in the learner's process, so it decides
nothing: the judge takes a knock only while the runner, outside the kernel, says the check cell
of that exercise runs, and only once per cell (process.py); every value it is sent back is
plain data the judge holds to its own references.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence

from course_utils import messages
from course_utils.grading.judge import proxies

WAIT = 120.0  # seconds a check knocks on the judge's socket, while the judge starts


def ask(path: str, exercise_id: str, answers: Sequence) -> tuple[str, str]:
    """Knock on the judge's socket for `exercise_id`, answer its requests about `answers`, and
    return its visible (verdict, message); the held-out cases it ran stay with it."""
    try:
        conn = _connect(path)
    except OSError as e:
        return "failed", f"not graded: the judge did not answer ({e})"
    with conn:
        kinds = [{"type": kind, "callable": c} for kind, c in map(proxies.describe, answers)]
        opening = {"op": "check", "exercise": exercise_id, "answers": kinds}
        try:
            messages.send(conn, opening)
            verdict = serve(conn, answers)
        except (ConnectionError, OSError) as e:
            return "failed", f"not graded: the judge stopped answering ({e})"
    return str(verdict.get("verdict")), str(verdict.get("message"))


def serve(conn: socket.socket, answers: Sequence) -> dict:
    """Answer the judge's requests about `answers` until it sends its verdict (or refuses the
    knock); return that message."""
    from course_utils.grading.judge import wire  # torch, which the kernel has imported anyway

    while True:
        header, data = messages.receive(conn)
        if header.get("op") in ("verdict", "refused"):
            return header
        params = wire.decode(data) if data else None
        reply, payload = proxies.answer_request(answers, header, params)
        messages.send(conn, reply, payload)


def _connect(path: str) -> socket.socket:
    deadline = time.monotonic() + WAIT
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
            return conn
        except OSError:
            conn.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
