"""Lesson 06 checkers: pass on the reference, fail with a useful message on known-wrong answers."""

import os
import signal
import tempfile

import torch

from course_utils.checkpoint import unwrap_model
from course_utils.grading import run_check
from course_utils.resumable import EX_TEMPFAIL, Config, train


def stub(*args):
    raise NotImplementedError("Exercise 06.x")


def make_checkpoint(model, optimizer, scheduler, epoch, step):
    return {
        "model": unwrap_model(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": epoch,
        "step": step,
        "rng": torch.get_rng_state(),
    }


def test_make_checkpoint():
    assert run_check("06.1", make_checkpoint).passed
    wrapped = run_check("06.1", lambda m, *a: {**make_checkpoint(m, *a), "model": m.state_dict()})
    assert wrapped.verdict == "failed"
    assert "model: expected model keys ['0.weight', '0.bias'] (unwrap the model first)" in (
        wrapped.message
    )
    no_rng = run_check(
        "06.1", lambda *a: {k: v for k, v in make_checkpoint(*a).items() if k != "rng"}
    )
    assert no_rng.message.endswith("got no rng")
    assert run_check("06.1", stub).verdict == "not attempted yet"


def atomic_save(obj, path):
    tmp = f"{path}.tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def test_atomic_save():
    assert run_check("06.2", atomic_save).passed
    plain = run_check("06.2", lambda obj, path: torch.save(obj, path))
    assert plain.verdict == "failed" and "os.replace(a temporary file in the same folder" in (
        plain.message
    )

    def elsewhere(obj, path):  # a temp file in another folder: not atomic across file systems
        tmp = os.path.join(tempfile.mkdtemp(), "x.tmp")
        torch.save(obj, tmp)
        os.replace(tmp, path)

    assert (
        "expected os.replace(a temporary file in the same folder"
        in run_check("06.2", elsewhere).message
    )
    assert run_check("06.2", stub).verdict == "not attempted yet"


def test_safe_load():
    assert run_check("06.3", lambda p: torch.load(p, map_location="cpu", weights_only=True)).passed
    unsafe = run_check("06.3", lambda p: torch.load(p, map_location="cpu", weights_only=False))
    assert unsafe.verdict == "failed"
    assert unsafe.message == (
        "expected the malicious file refused, got its code ran (it created a folder); "
        "load with weights_only=True"
    )
    assert run_check("06.3", stub).verdict == "not attempted yet"


SETTINGS = dict(epochs=3, max_steps=24, save_every=3)


def _signal_at_step(n):
    """A log that sends this process SIGUSR1 after step n, as Slurm would (no child process)."""

    def log(msg):
        if msg.startswith(f"step {n} "):
            os.kill(os.getpid(), signal.SIGUSR1)

    return log


def _signalled_run(folder):
    try:
        train(Config(ckpt_dir=str(folder), **SETTINGS), log=_signal_at_step(5))
    except SystemExit as e:  # the program's exit: saved, "run again to resume"
        assert e.code == EX_TEMPFAIL


def preempt_and_resume(folder):  # the answer, with both runs in this process
    _signalled_run(folder)
    train(Config(ckpt_dir=str(folder), **SETTINGS), log=lambda msg: None)


def test_preempt_and_resume_passes_on_records_of_a_signalled_then_resumed_run():
    result = run_check("06.4", preempt_and_resume)
    assert result.passed, result.message
    assert result.message == (
        "stopped by SIGUSR1 locally (no Slurm here), saved, and resumed from that step exactly"
    )


def test_preempt_and_resume_fails_without_a_signal_or_without_a_resume():
    def never_signals(folder):
        train(Config(ckpt_dir=str(folder), **SETTINGS), log=lambda msg: None)

    unsignalled = run_check("06.4", never_signals)
    assert unsignalled.verdict == "failed"
    assert unsignalled.message == (
        "expected a run stopped by a signal (SIGUSR1, as Slurm sends) that saved and exited, "
        "got runs start@0, finished@24 (send the signal while it trains)"
    )
    assert (
        "expected a second run that resumed from step 5"
        in run_check("06.4", _signalled_run).message
    )

    def resumes_elsewhere(folder):  # a resume with other settings cannot end as the original
        _signalled_run(folder)
        train(Config(ckpt_dir=str(folder), **SETTINGS), restore_rng=False, log=lambda msg: None)

    wrong = run_check("06.4", resumes_elsewhere)
    assert "expected final parameters bitwise equal to an uninterrupted run" in wrong.message
    assert "records in history.json" in run_check("06.4", lambda folder: None).message
    assert run_check("06.4", stub).verdict == "not attempted yet"


# ---- held-out cases ------------------------------------------------------------------------


def test_06_1_held_out_cases_fail_the_visible_epoch_and_step_typed_in(held_out_catches):
    def typed_in(model, optimizer, scheduler, epoch, step):
        return make_checkpoint(model, optimizer, scheduler, 2, 17)

    failure = held_out_catches("06.1", make_checkpoint, typed_in)
    assert failure.startswith("expected epoch ") and failure.endswith("got epoch 2, step 17")
