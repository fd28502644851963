"""Lesson 06 checkers: pass on the reference, fail with a useful message on known-wrong answers."""

import os
import tempfile

import torch
import torch.nn.functional as F

from course_utils.checkpoint import unwrap_model
from course_utils.grading import run_check


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


def train_until_preempted(model, optimizer, batches, flag, save):
    step = 0
    for inputs, targets in batches:
        optimizer.zero_grad()
        F.mse_loss(model(inputs), targets).backward()
        optimizer.step()
        step += 1
        if flag.requested:
            save(step)
            return step
    return step


def test_train_until_preempted():
    assert run_check("06.4", train_until_preempted).passed

    def checks_before_step(model, optimizer, batches, flag, save):  # abandons the current step
        step = 0
        for inputs, targets in batches:
            if flag.requested:
                save(step)
                return step
            optimizer.zero_grad()
            F.mse_loss(model(inputs), targets).backward()
            optimizer.step()
            step += 1
        return step

    early = run_check("06.4", checks_before_step)
    assert early.verdict == "failed"
    assert early.message == "signal during step 3: expected 3 optimizer steps, got 2"

    def ignores_flag(model, optimizer, batches, flag, save):
        return sum(1 for _ in batches)

    assert "expected 3 optimizer steps, got 0" in run_check("06.4", ignores_flag).message
    assert run_check("06.4", stub).verdict == "not attempted yet"


# ---- held-out cases ------------------------------------------------------------------------


def test_06_1_held_out_cases_fail_the_visible_epoch_and_step_typed_in(held_out_catches):
    def typed_in(model, optimizer, scheduler, epoch, step):
        return make_checkpoint(model, optimizer, scheduler, 2, 17)

    failure = held_out_catches("06.1", make_checkpoint, typed_in)
    assert failure.startswith("expected epoch ") and failure.endswith("got epoch 2, step 17")
