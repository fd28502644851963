"""Each lesson-04 checker passes the reference answer, fails a known-wrong one, spots a stub."""

import re

import pytest
import torch
import torch.nn.functional as F

from course_utils.grading import FAILED, NOT_ATTEMPTED, PASSED, run_check
from course_utils.precision import matmul_error, round_to_tf32


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: ...")


def truncate_to_tf32(x):  # what the hardware notes call "reads the first 10 bits"
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def round_half_up(x):  # rounds ties away from zero instead of to even
    bits = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    out = ((bits + 0x1000) & ~0x1FFF) & 0xFFFFFFFF
    out = torch.where(out >= 2**31, out - 2**32, out).to(torch.int32).view(torch.float32)
    return torch.where(torch.isnan(x), x, out)


def choose_precision(bound, n):
    for mode in ("bf16", "tf32", "ieee"):
        if matmul_error(n, mode) <= bound:
            return mode
    return None


def choose_precision_safest(bound, n):  # always exact: meets the bound, but not the fastest
    return "ieee" if matmul_error(n, "ieee") <= bound else None


def autocast_loss(model, inputs, targets):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(inputs)
        loss = F.cross_entropy(logits, targets)
    return logits, loss


def autocast_loss_by_casting_model(model, inputs, targets):  # casts weights instead
    logits = model.bfloat16()(inputs.bfloat16())
    return logits, F.cross_entropy(logits.float(), targets)


@pytest.mark.parametrize(
    ("exercise_id", "answer"),
    [("04.1", round_to_tf32), ("04.2", choose_precision), ("04.3", autocast_loss)],
)
def test_reference_answers_pass(exercise_id, answer):
    result = run_check(exercise_id, answer)
    assert result.verdict == PASSED, result.message


@pytest.mark.parametrize(
    ("exercise_id", "answer", "message"),
    [
        ("04.1", truncate_to_tf32, r"input 0x3F803000: expected 0x3F804000, got 0x3F802000"),
        ("04.1", round_half_up, r"input 0x3F801000: expected 0x3F800000, got 0x3F802000"),
        ("04.2", choose_precision_safest, r"expected 'bf16', got 'ieee'"),
        ("04.3", autocast_loss_by_casting_model, r"expected parameters left in float32, got"),
    ],
)
def test_wrong_answers_fail_with_a_useful_message(exercise_id, answer, message):
    result = run_check(exercise_id, answer)
    assert result.verdict == FAILED
    assert re.search(message, result.message), result.message


@pytest.mark.parametrize("exercise_id", ["04.1", "04.2", "04.3"])
def test_stub_is_not_attempted(exercise_id):
    assert run_check(exercise_id, stub).verdict == NOT_ATTEMPTED


# ---- held-out cases ------------------------------------------------------------------------


def test_04_2_held_out_cases_fail_answers_typed_in_for_the_visible_bounds(held_out_catches):
    errors = {mode: matmul_error(256, mode) for mode in ("bf16", "tf32", "ieee")}
    bounds = [5 * errors["bf16"], 2 * errors["tf32"], 0.5 * errors["tf32"], 2 * errors["ieee"],
              0.1 * errors["ieee"]]  # fmt: skip
    visible = {bound: choose_precision(bound, 256) for bound in bounds}

    def typed_in(bound, n):
        return visible.get(bound, "tf32")

    failure = held_out_catches("04.2", choose_precision, typed_in)
    assert re.match(r"choose_precision\([\d.e-]+, n=\d+\): expected ", failure), failure
