"""The judge's protocol, end to end in this process: a judge (grading/judge.py) listening on a
Unix socket in a thread, and `check` in the test standing for the learner's kernel. No process
is started (tests/integration/test_grader.py grades real notebooks in the sandbox)."""

import json
import socket
import threading

import pytest
import torch

from course_utils.grading import answers, exercises, judge


def grad_of_loss(x):
    x = x.detach().clone().requires_grad_(True)
    (x**3 + 2 * x).sum().backward()
    return x.grad


@pytest.fixture
def judged(tmp_path, monkeypatch, capsys):
    """A judge with seed 5 listening at tmp_path/judge.sock; returns a function that reads its
    verdict lines so far."""
    path, verdicts = tmp_path / "judge.sock", tmp_path / "verdicts.jsonl"
    thread = threading.Thread(target=judge.serve, args=(path, verdicts, 5, 30.0), daemon=True)
    thread.start()
    said = ""
    for _ in range(500):  # the socket file appears at bind; READY is printed once it listens
        said += capsys.readouterr().out
        if said:
            break
        threading.Event().wait(0.01)
    assert said == f"{judge.READY}\n"
    monkeypatch.setenv(exercises.JUDGE_VARIABLE, str(path))

    def lines():
        text = verdicts.read_text() if verdicts.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    return lines


def test_the_kernel_prints_the_judges_visible_verdict_and_the_judge_keeps_the_rest(
    judged, capsys, monkeypatch
):
    exercises.check("01.4", grad_of_loss)
    printed = capsys.readouterr().out
    monkeypatch.delenv(exercises.JUDGE_VARIABLE)
    exercises.check("01.4", grad_of_loss)
    assert printed == capsys.readouterr().out  # the same line as a check without a judge
    [line] = judged()
    assert line == {
        "exercise": "01.4",
        "verdict": "passed",
        "message": "d/dx sum(x^3 + 2x) = 3x^2 + 2, computed by autograd",
        "held_out": 3,
        "held_out_passed": 3,
        "failures": [],
    }


def test_a_table_of_the_visible_answer_fails_the_judges_held_out_cases(judged, capsys):
    table = lambda x: torch.tensor([5.0, 14.0, 29.0])  # noqa: E731
    exercises.check("01.4", table)
    assert capsys.readouterr().out.startswith("[01.4] passed")  # the visible case passes...
    [line] = judged()
    assert line["held_out_passed"] == 0  # ...the draws of the judge's seed do not


def test_what_the_answer_prints_during_the_held_out_cases_stays_out_of_the_cell(judged, capsys):
    def noisy(x):
        print("my debug line")
        return grad_of_loss(x)

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
    exercises.check("01.4", lambda x: torch.zeros(3).as_subclass(Liar))
    said = capsys.readouterr().out
    assert said.startswith("[01.4] failed: an answer that is not plain data (test_judge.Liar)")
    assert judged()[0]["verdict"] == "failed"


def test_a_kernel_that_forges_its_replies_only_sends_plain_data(judged, monkeypatch):
    """A learner who writes their own end of the protocol still answers the judge's draws: a
    typed-in reply to every call fails them."""
    path = exercises.os.environ[exercises.JUDGE_VARIABLE]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    answers.send(conn, {"op": "check", "exercise": "01.4", "answers": [{"callable": True}]})
    forged = answers.wire.encode(torch.tensor([5.0, 14.0, 29.0]))
    while True:
        header, _ = answers.receive(conn)
        if header["op"] == "verdict":
            break
        answers.send(conn, {"op": "result"}, forged)
    conn.close()
    assert header["verdict"] == "passed"  # the visible case it knew...
    assert judged()[0]["held_out_passed"] == 0  # ...but not the judge's draws


def test_a_kernel_that_goes_away_mid_check_is_recorded_as_failed(judged):
    path = exercises.os.environ[exercises.JUDGE_VARIABLE]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    answers.send(conn, {"op": "check", "exercise": "01.4", "answers": [{"callable": True}]})
    answers.receive(conn)  # the judge's first call...
    conn.close()  # ...never answered
    for _ in range(100):
        if judged():
            break
        threading.Event().wait(0.05)
    [line] = judged()
    assert line["verdict"] == "failed" and "the kernel stopped answering" in line["message"]


def test_without_a_judge_listening_the_check_says_it_was_not_graded(tmp_path, monkeypatch):
    monkeypatch.setattr(exercises, "JUDGE_WAIT", 0.2)
    result = exercises.ask_the_judge(str(tmp_path / "nobody.sock"), "01.4", (grad_of_loss,))
    assert result.verdict == "failed" and result.message.startswith("not graded: the judge did")


def test_the_judge_leaves_once_the_grader_that_started_it_is_gone(tmp_path, monkeypatch):
    """A grader killed with SIGKILL cannot end its judge: the judge sees its parent change."""
    monkeypatch.setattr(judge, "ORPHAN_POLL", 0.05)
    parents = iter([4242])  # the grader at the start, then init: the grader is gone
    monkeypatch.setattr(judge.os, "getppid", lambda: next(parents, 1))
    args = (tmp_path / "judge.sock", tmp_path / "verdicts.jsonl", None, 5.0)
    thread = threading.Thread(target=judge.serve, args=args, daemon=True)
    thread.start()
    thread.join(timeout=5)
    assert not thread.is_alive()
