"""Messages on a local socket: one line of JSON (at most MAX_HEADER bytes), then `size` bytes.

No lesson teaches it: it is how the grading of every lesson's checks (lessons 00 to 10) talks
between processes, torch-free. The kernel's knock on the judge's door, the judge's requests and
the kernel's replies, the runner's announcements of check cells and the reports of the course's
programs (`witness`) travel so.
"""

from __future__ import annotations

import json
import socket

MAX_HEADER = 64 * 1024
MAX_PAYLOAD = 512 * 2**20  # one answer: a model's state dict fits, a flood does not


def send(conn: socket.socket, header: dict, payload: bytes = b"") -> None:
    line = json.dumps({**header, "size": len(payload)}).encode() + b"\n"
    conn.sendall(line + payload)


def receive(conn: socket.socket) -> tuple[dict, bytes]:
    """One message: (header, payload). ConnectionError when the other end went away."""
    line = _read_line(conn)
    try:
        header = json.loads(line)
        size = int(header.get("size", 0))
    except (ValueError, TypeError, AttributeError) as e:
        raise ConnectionError(f"a malformed message header: {line[:80]!r}") from e
    if not 0 <= size <= MAX_PAYLOAD:
        raise ConnectionError(f"a message of {size} bytes")
    return header, _read_exactly(conn, size)


def _read_line(conn: socket.socket) -> bytes:
    chunks = []
    while True:
        byte = conn.recv(1)
        if not byte:
            raise ConnectionError("the other end closed the connection")
        if byte == b"\n":
            return b"".join(chunks)
        chunks.append(byte)
        if len(chunks) > MAX_HEADER:
            raise ConnectionError("a message header over the limit")


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        part = conn.recv(min(left, 1 << 20))
        if not part:
            raise ConnectionError("the other end closed the connection mid-message")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)
