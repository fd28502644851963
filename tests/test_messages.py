"""messages: one JSON line, then its payload, on a socket; a malformed or endless message is a
ConnectionError, never a hang or a crash (a socket pair here, no process)."""

import socket

import pytest

from course_utils import messages


def test_a_message_and_its_payload_cross_whole():
    a, b = socket.socketpair()
    with a, b:
        messages.send(a, {"op": "result", "n": 3}, b"\x00payload\n")
        messages.send(a, {"op": "ok"})
        assert messages.receive(b) == ({"op": "result", "n": 3, "size": 9}, b"\x00payload\n")
        assert messages.receive(b) == ({"op": "ok", "size": 0}, b"")


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        (b"not json\n", "a malformed message header"),
        (b'{"size": -1}\n', "a message of -1 bytes"),
        (b'{"size": 99}\nshort', "closed the connection mid-message"),
        (b"x" * (messages.MAX_HEADER + 2), "a message header over the limit"),
    ],
)
def test_what_is_not_a_message_is_a_connection_error(sent, said):
    a, b = socket.socketpair()
    with a, b:
        a.sendall(sent)
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(ConnectionError, match=said):
            messages.receive(b)
