"""Lesson 00 checkers: pass on the reference, fail with a useful message on known-wrong answers."""

from course_utils.grading import run_check


def _stub(*args):
    raise NotImplementedError


def test_pip_command():
    assert run_check("00.1", lambda: "pip install --no-deps torchvision==0.21.0").passed
    wrong = run_check("00.1", lambda: "pip install torchvision==0.21.0")
    assert wrong.verdict == "failed" and "--no-deps" in wrong.message
    replaces = run_check("00.1", lambda: "pip install --no-deps torch torchvision")
    assert "torch itself not named" in replaces.message
    assert run_check("00.1", _stub).verdict == "not attempted yet"


def test_pairing():
    def reference(t, v):
        return int(t.split(".")[1]) + 15 == int(v.split(".")[1])

    assert run_check("00.2", reference).passed
    wrong = run_check("00.2", lambda t, v: True)
    assert wrong.message == "compatible('2.14.1', '0.24.1'): expected False, got True"
    assert run_check("00.2", _stub).verdict == "not attempted yet"


def test_blocking_problems():
    assert run_check("00.3", lambda r: [x["topic"] for x in r if x["status"] == "error"]).passed
    wrong = run_check("00.3", lambda r: [x["topic"] for x in r if x["status"] != "ok"])
    assert wrong.verdict == "failed"
    assert "got ['gpu 0', 'cpu threads', 'torchvision']" in wrong.message
