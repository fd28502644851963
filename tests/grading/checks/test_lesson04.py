"""Each lesson-04 checker passes the reference answer, fails a known-wrong one, spots a stub.

04.2 runs the measurement on this CPU; 04.3 profiles a real training step under autocast.
"""

import re

import pytest
import torch
import torch.nn.functional as F

from course_utils.grading import FAILED, NOT_ATTEMPTED, PASSED, run_check
from course_utils.precision import (
    PowerLaw,
    power_law_fit,
    relative_error,
    round_to_tf32,
    rounded,
)


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: ...")


def truncate_to_tf32(x):  # what the hardware notes call "reads the first 10 bits"
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def round_half_up(x):  # rounds ties away from zero instead of to even
    bits = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    out = ((bits + 0x1000) & ~0x1FFF) & 0xFFFFFFFF
    out = torch.where(out >= 2**31, out - 2**32, out).to(torch.int32).view(torch.float32)
    return torch.where(torch.isnan(x), x, out)


def error_against_n(mode, ns, seed=0):
    gen = torch.Generator().manual_seed(seed)
    errors = []
    for n in ns:
        a = torch.randn(n, n, dtype=torch.float64, generator=gen)
        b = torch.randn(n, n, dtype=torch.float64, generator=gen)
        product = rounded(a.float(), mode) @ rounded(b.float(), mode)
        errors.append(relative_error(product, a @ b))
    return errors, power_law_fit(ns, errors)


def error_against_n_other_seed(mode, ns):  # other random matrices: still this machine's error
    return error_against_n(mode, ns, seed=7)


def error_against_n_unrounded(mode, ns):  # forgot to round: plain float32's error
    return error_against_n("ieee", ns)


def error_against_n_swapped(mode, ns):
    return error_against_n({"tf32": "bf16", "bf16": "tf32"}[mode], ns)


def error_against_n_typed_fit(mode, ns):
    errors, _ = error_against_n(mode, ns)
    return errors, PowerLaw(1e-3, 0.5)  # the sqrt(n) of the lesson's prose, not a fit


def error_against_n_linear_fit(mode, ns):  # a straight line through (n, error), not log-log
    errors, _ = error_against_n(mode, ns)
    slope = (errors[-1] - errors[0]) / (ns[-1] - ns[0])
    return errors, PowerLaw(errors[0], slope)


def autocast_step(model, inputs, targets):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(inputs), targets)
    loss.backward()
    return loss


def step_by_casting_model(model, inputs, targets):  # casts the weights instead
    loss = F.cross_entropy(model.bfloat16()(inputs.bfloat16()), targets)
    loss.backward()
    return loss


def step_loss_outside_autocast(model, inputs, targets):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(inputs)
    loss = F.cross_entropy(logits, targets)  # log_softmax on bfloat16 logits
    loss.backward()
    return loss.float()


def step_without_autocast(model, inputs, targets):
    loss = F.cross_entropy(model(inputs), targets)
    loss.backward()
    return loss


def step_without_backward(model, inputs, targets):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return F.cross_entropy(model(inputs), targets)


@pytest.mark.parametrize(
    ("exercise_id", "answer"),
    [
        ("04.1", round_to_tf32),
        ("04.2", error_against_n),
        ("04.2", error_against_n_other_seed),
        ("04.3", autocast_step),
    ],
)
def test_reference_answers_pass(exercise_id, answer):
    result = run_check(exercise_id, answer)
    assert result.verdict == PASSED, result.message


@pytest.mark.parametrize(
    ("exercise_id", "answer", "message"),
    [
        ("04.1", truncate_to_tf32, r"input 0x3F803000: expected 0x3F804000, got 0x3F802000"),
        ("04.1", round_half_up, r"input 0x3F801000: expected 0x3F800000, got 0x3F802000"),
        (
            "04.2",
            error_against_n_unrounded,
            r"tf32, n = 64: expected about 0.00\d+ \(re-measured by the check\), got 1.\de-06: "
            r"that is about ieee's error; round both float32 inputs as tf32 reads them",
        ),
        ("04.2", error_against_n_swapped, r"tf32, n = 64: .* that is about bf16's error"),
        (
            "04.2",
            error_against_n_typed_fit,
            r"tf32: expected the fit of your own errors, exponent -?0.\d+ .*got exponent 0.5$",
        ),
        ("04.2", error_against_n_linear_fit, r"tf32: expected the fit of your own errors"),
        ("04.3", step_by_casting_model, r"0.weight: expected parameters left in float32, got"),
        (
            "04.3",
            step_loss_outside_autocast,
            r"the trace: expected aten::log_softmax in float32, got \['bfloat16'\]: compute the "
            r"loss inside the autocast block",
        ),
        ("04.3", step_without_autocast, r"expected matmuls and convolutions in bfloat16 in th"),
        ("04.3", step_without_backward, r"0.weight: expected a gradient for every parameter"),
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


def test_04_1_held_out_cases_fail_outputs_kept_for_the_visible_inputs(held_out_catches):
    from course_utils.grading.checks.lesson04 import _special_values

    gen = torch.Generator().manual_seed(4)  # the visible inputs, drawn as the check draws them
    scale = 10.0 ** torch.randint(-40, 38, (1000,), generator=gen)
    seen = (torch.randn(1000, generator=gen) * scale).float()
    inputs = [_special_values(), seen, torch.tensor([float("nan")])]
    kept = {x.numpy().tobytes(): round_to_tf32(x) for x in inputs}

    def table(x):  # right on the visible inputs, and only there
        return kept.get(x.numpy().tobytes(), x.clone())

    failure = held_out_catches("04.1", round_to_tf32, table)
    assert re.fullmatch(r"input 0x[0-9A-F]{8}: expected 0x[0-9A-F]{8}, got 0x[0-9A-F]{8}", failure)
