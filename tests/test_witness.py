"""witness: a course program's report reaches the socket in COURSE_WITNESS, and nothing happens
without one (a listening socket in a thread here, no process)."""

import socket
import threading

from course_utils import messages, witness


def test_without_a_witness_a_report_goes_nowhere(monkeypatch):
    monkeypatch.delenv(witness.VARIABLE, raising=False)
    assert witness.report("start", resumed_from=0) is False


def test_a_report_names_the_event_its_fields_and_the_program(tmp_path, monkeypatch):
    path = tmp_path / "door"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    heard = []

    def answer():
        conn, _ = server.accept()
        with conn:
            heard.append(messages.receive(conn)[0])
            messages.send(conn, {"op": "taken"})

    thread = threading.Thread(target=answer)
    thread.start()
    monkeypatch.setenv(witness.VARIABLE, str(path))
    assert witness.report("stopped", signal="SIGUSR1", step=5) is True
    thread.join()
    [header] = heard
    assert header["op"] == "witness" and header["event"] == "stopped"
    assert header["fields"] == {"signal": "SIGUSR1", "step": 5}
    assert "program" in header  # this test's __main__ has no -m module: None


def test_a_witness_that_is_gone_costs_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(witness.VARIABLE, str(tmp_path / "nobody"))
    assert witness.report("finished", step=3) is False
