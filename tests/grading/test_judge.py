"""The judge's protocol, end to end in this process: a judge (grading/judge/process.py) listening
on a Unix socket in a thread, the runner's channel (one end of a socket pair) driven by the test,
and `check` in the test standing for the learner's kernel. No process is started
(tests/integration/test_grader.py grades real notebooks in the sandbox)."""

import contextlib
import json
import os
import socket
import threading

import pytest
import torch

from course_utils import messages
from course_utils.grading import exercises
from course_utils.grading.judge import beside, kernel, process, wire


def grad_of_loss(x):
    x = x.detach().clone().requires_grad_(True)
    (x**3 + 2 * x).sum().backward()
    return x.grad


class Runner:
    """The runner's end of the channel: says when a check cell runs, and waits for the judge."""

    def __init__(self, channel: socket.socket):
        self.channel = channel

    def say(self, message: dict) -> None:
        messages.send(self.channel, message)
        assert messages.receive(self.channel)[0] == {"op": "ok", "size": 0}

    @contextlib.contextmanager
    def cell(self, exercise_id: str, kernel_pid: int | None = None):
        self.say({"op": "open", "exercise": exercise_id, "kernel": kernel_pid or os.getpid()})
        yield
        self.say({"op": "close", "exercise": exercise_id})


@pytest.fixture
def judged(tmp_path, monkeypatch):
    """A judge with seed 5 listening at tmp_path/judge.sock; returns (the runner, a function
    that reads what the judge wrote so far)."""
    path, verdicts = tmp_path / "judge.sock", tmp_path / "verdicts.jsonl"
    judge_end, runner_end = socket.socketpair()
    server = process.listen(path)
    args = (server, judge_end, verdicts, 5, 30.0)
    threading.Thread(target=process.serve, args=args, daemon=True).start()
    monkeypatch.setenv(exercises.JUDGE_VARIABLE, str(path))

    def lines():
        return beside.read_verdicts(verdicts)

    return Runner(runner_end), lines


def test_the_kernel_prints_the_judges_visible_verdict_and_the_judge_keeps_the_rest(
    judged, capsys, monkeypatch
):
    runner, lines = judged
    with runner.cell("01.4"):
        exercises.check("01.4", grad_of_loss)
    printed = capsys.readouterr().out
    monkeypatch.delenv(exercises.JUDGE_VARIABLE)
    exercises.check("01.4", grad_of_loss)
    assert printed == capsys.readouterr().out  # the same line as a check without a judge
    assert lines().lines == {
        "01.4": {
            "exercise": "01.4",
            "verdict": "passed",
            "message": "d/dx sum(x^3 + 2x) = 3x^2 + 2, computed by autograd",
            "held_out": 3,
            "held_out_passed": 3,
            "failures": [],
        }
    }


def test_a_knock_that_no_check_cell_asked_for_is_refused_and_written_down(judged, capsys):
    runner, lines = judged
    exercises.check("01.4", grad_of_loss)  # from an exercise cell: no check cell runs
    assert capsys.readouterr().out == (
        "[01.4] failed: not graded: a check of 01.4 that no check cell asked for\n"
    )
    with runner.cell("01.3"):  # the check cell of another exercise
        exercises.check("01.4", grad_of_loss)
    found = lines()
    assert found.lines == {}
    assert [line["why"] for line in found.refused] == [
        "a check of 01.4 that no check cell asked for",
        "a check of 01.4 that no check cell asked for",
    ]


def test_only_the_first_check_of_a_cell_counts(judged, capsys):
    runner, lines = judged
    table = lambda x: torch.tensor([5.0, 14.0, 29.0])  # noqa: E731
    with runner.cell("01.4"):
        exercises.check("01.4", table)  # the cell's own check, whatever it passed
        exercises.check("01.4", grad_of_loss)  # a second knock, with a better answer
    found = lines()
    assert found.lines["01.4"]["held_out_passed"] == 0
    assert found.refused == [{"refused": "01.4", "why": "a second check of 01.4 in its check cell"}]
    with runner.cell("01.4"):  # the same cell announced again (it is not run twice)
        exercises.check("01.4", grad_of_loss)
    assert lines().lines["01.4"]["held_out_passed"] == 0


def test_a_knock_from_another_process_than_the_kernel_is_refused(judged, capsys):
    runner, lines = judged
    with runner.cell("01.4", kernel_pid=os.getpid() + 1):
        exercises.check("01.4", grad_of_loss)
    assert lines().refused == [
        {"refused": "01.4", "why": "a check of 01.4 from a process other than the kernel"}
    ]


def test_a_table_of_the_visible_answer_fails_the_judges_held_out_cases(judged, capsys):
    runner, lines = judged
    table = lambda x: torch.tensor([5.0, 14.0, 29.0])  # noqa: E731
    with runner.cell("01.4"):
        exercises.check("01.4", table)
    assert capsys.readouterr().out.startswith("[01.4] passed")  # the visible case passes...
    assert lines().lines["01.4"]["held_out_passed"] == 0  # ...the draws of the judge's seed do not


def test_what_the_answer_prints_during_the_held_out_cases_stays_out_of_the_cell(judged, capsys):
    runner, _ = judged

    def noisy(x):
        print("my debug line")
        return grad_of_loss(x)

    with runner.cell("01.4"):
        exercises.check("01.4", noisy)
    out = capsys.readouterr().out
    assert out.count("my debug line") == 1 and out.endswith("computed by autograd\n")


class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def test_an_answer_that_lies_about_equality_fails_at_the_judge(judged, capsys):
    runner, lines = judged
    with runner.cell("01.4"):
        exercises.check("01.4", lambda x: torch.zeros(3).as_subclass(Liar))
    said = capsys.readouterr().out
    assert said.startswith("[01.4] failed: an answer that is not plain data (test_judge.Liar)")
    assert lines().lines["01.4"]["verdict"] == "failed"


def _knock(exercise_id: str) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(os.environ[exercises.JUDGE_VARIABLE])
    opening = {"op": "check", "exercise": exercise_id, "answers": [{"callable": True}]}
    messages.send(conn, opening)
    return conn


def test_a_kernel_that_forges_its_replies_only_sends_plain_data(judged):
    """A learner who writes their own end of the protocol still answers the judge's draws: a
    typed-in reply to every call fails them."""
    runner, lines = judged
    forged = wire.encode(torch.tensor([5.0, 14.0, 29.0]))
    with runner.cell("01.4"), _knock("01.4") as conn:
        while True:
            header, _ = messages.receive(conn)
            if header["op"] == "verdict":
                break
            messages.send(conn, {"op": "result"}, forged)
    assert header["verdict"] == "passed"  # the visible case it knew...
    assert lines().lines["01.4"]["held_out_passed"] == 0  # ...but not the judge's draws


def test_a_kernel_that_goes_away_mid_check_is_recorded_as_failed(judged):
    runner, lines = judged
    with runner.cell("01.4"):
        conn = _knock("01.4")
        messages.receive(conn)  # the judge's first call...
        conn.close()  # ...never answered
        for _ in range(100):
            if lines().lines:
                break
            threading.Event().wait(0.05)
    line = lines().lines["01.4"]
    assert line["verdict"] == "failed" and "the kernel stopped answering" in line["message"]


def test_without_a_judge_listening_the_check_says_it_was_not_graded(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel, "WAIT", 0.2)
    verdict, message = kernel.ask(str(tmp_path / "nobody.sock"), "01.4", (grad_of_loss,))
    assert verdict == "failed" and message.startswith("not graded: the judge did not answer")


def test_the_judge_leaves_once_the_grader_that_started_it_is_gone(tmp_path, monkeypatch):
    """A grader killed with SIGKILL cannot end its judge: the judge sees its parent change."""
    monkeypatch.setattr(process, "ORPHAN_POLL", 0.05)
    parents = iter([4242])  # the grader at the start, then init: the grader is gone
    monkeypatch.setattr(process.os, "getppid", lambda: next(parents, 1))
    judge_end, _ = socket.socketpair()
    args = (process.listen(tmp_path / "judge.sock"), judge_end, tmp_path / "v.jsonl", None, 5.0)
    thread = threading.Thread(target=process.serve, args=args, daemon=True)
    thread.start()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_a_verdicts_file_keeps_the_first_verdict_of_each_exercise(tmp_path):
    path = tmp_path / "verdicts.jsonl"
    first = {"exercise": "01.2", "verdict": "failed", "message": "no"}
    later = {"exercise": "01.2", "verdict": "passed", "message": "yes"}
    path.write_text("\n".join(map(json.dumps, [first, later, {"refused": "01.2", "why": "x"}])))
    found = beside.read_verdicts(path)
    assert found.lines == {"01.2": first} and found.refused == [{"refused": "01.2", "why": "x"}]
