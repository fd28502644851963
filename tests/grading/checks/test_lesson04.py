"""Each lesson-04 checker passes the reference answer, fails a known-wrong one, spots a stub.

04.2 runs the measurement on this CPU; 04.3 profiles a real training step under autocast.
"""

import json
import re
from pathlib import Path

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
from course_utils.profiling import profile_call


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: ...")


def to_tf32_in_the_lesson(x):  # the solution's bit arithmetic
    bits = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    kept = (bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF & 0xFFFFFFFF
    kept = torch.where(kept >= 2**31, kept - 2**32, kept).to(torch.int32)
    return torch.where(torch.isnan(x), x, kept.view(torch.float32))


def truncate_to_tf32(x):  # what the hardware notes call "reads the first 10 bits"
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def round_half_up(x):  # rounds ties away from zero instead of to even
    bits = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    out = ((bits + 0x1000) & ~0x1FFF) & 0xFFFFFFFF
    out = torch.where(out >= 2**31, out - 2**32, out).to(torch.int32).view(torch.float32)
    return torch.where(torch.isnan(x), x, out)


def error_against_n(mode, ns, seed):
    gen = torch.Generator().manual_seed(seed)
    errors = []
    for n in ns:
        a = torch.randn(n, n, dtype=torch.float64, generator=gen)
        b = torch.randn(n, n, dtype=torch.float64, generator=gen)
        product = rounded(a.float(), mode) @ rounded(b.float(), mode)
        errors.append(relative_error(product, a @ b))
    return errors, power_law_fit(ns, errors)


def error_against_n_other_seed(mode, ns, seed):  # its own random matrices, not the seed's
    return error_against_n(mode, ns, seed=7)


def error_against_n_fresh_draws(mode, ns, seed):  # a new generator for each n
    errors = []
    for n in ns:
        gen = torch.Generator().manual_seed(seed)
        a = torch.randn(n, n, dtype=torch.float64, generator=gen)
        b = torch.randn(n, n, dtype=torch.float64, generator=gen)
        errors.append(relative_error(rounded(a.float(), mode) @ rounded(b.float(), mode), a @ b))
    return errors, power_law_fit(ns, errors)


def error_against_n_unrounded(mode, ns, seed):  # forgot to round: plain float32's error
    return error_against_n("ieee", ns, seed)


def error_against_n_swapped(mode, ns, seed):
    return error_against_n({"tf32": "bf16", "bf16": "tf32"}[mode], ns, seed)


def error_against_n_typed_fit(mode, ns, seed):
    errors, _ = error_against_n(mode, ns, seed)
    return errors, PowerLaw(1e-3, 0.5)  # the sqrt(n) of the lesson's prose, not a fit


def error_against_n_as_numbers(mode, ns, seed):  # errors as 0-d tensors, not floats
    errors, fit = error_against_n(mode, ns, seed)
    return [torch.tensor(e) for e in errors], fit


def error_against_n_linear_fit(mode, ns, seed):  # a straight line through (n, error), not log-log
    errors, _ = error_against_n(mode, ns, seed)
    slope = (errors[-1] - errors[0]) / (ns[-1] - ns[0])
    return errors, PowerLaw(errors[0], slope)


def autocast_step(model, inputs, targets):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(inputs), targets)
    loss.backward()
    return loss


def profiled(step):
    """The exercise's second function: `step` run once under the profiler, trace exported."""

    def profile_step(model, inputs, targets, trace_path):
        losses = []
        profile_call(lambda: losses.append(step(model, inputs, targets)), trace_path=trace_path)
        return losses[0]

    return profile_step


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


def step_twice(model, inputs, targets):  # gradients of two steps, accumulated
    autocast_step(model, inputs, targets)
    return autocast_step(model, inputs, targets)


def step_without_a_trace(model, inputs, targets, trace_path):
    return autocast_step(model, inputs, targets)


def step_with_a_typed_trace(model, inputs, targets, trace_path):
    """The step run unprofiled, and a trace written by hand with what the check reads."""
    loss = autocast_step(model, inputs, targets)
    events = [
        {"ph": "X", "cat": "cpu_op", "name": op, "ts": i, "dur": 1, "args": {"Input type": [t]}}
        for i, (op, t) in enumerate(
            (("aten::conv2d", "c10::BFloat16"), ("aten::nll_loss", "float"))
        )
    ]
    Path(trace_path).write_text(json.dumps({"traceEvents": events}))
    return loss


def step_with_a_well_informed_trace(model, inputs, targets, trace_path):
    """The step run unprofiled, and a trace written by hand with the batch's shapes and the
    dtypes the check reads: not the operators a profile of the step records."""
    loss = autocast_step(model, inputs, targets)
    dims = [list(inputs.shape), [4, 3, 3, 3]]
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::conv2d",
            "ts": 0,
            "dur": 5,
            "args": {"Input Dims": dims, "Input type": ["c10::BFloat16", "c10::BFloat16"]},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::log_softmax",
            "ts": 9,
            "dur": 5,
            "args": {"Input type": ["float"]},
        },
    ]
    Path(trace_path).write_text(json.dumps({"traceEvents": events}))
    return loss


def step_with_the_notebooks_trace(model, inputs, targets, trace_path):
    """The step run unprofiled, and the trace of another step (another model and batch)."""
    from course_utils.grading.probes.lesson04 import batch_of, small_model

    profiled(autocast_step)(small_model(0), *batch_of(16, 0), trace_path)
    return autocast_step(model, inputs, targets)


@pytest.mark.parametrize(
    ("exercise_id", "answer"),
    [
        ("04.1", round_to_tf32),
        ("04.1", to_tf32_in_the_lesson),
        ("04.2", error_against_n),
        ("04.3", profiled(autocast_step)),
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
            r"tf32, n = 64, seed = 0: expected 0.00191916 \(measured by the check at the same "
            r"draws\), got 1.\d+e-06: that is about ieee's error; round both float32 inputs as "
            r"tf32 reads them",
        ),
        ("04.2", error_against_n_swapped, r"tf32, n = 64, seed = 0: .* that is about bf16's err"),
        (
            "04.2",
            error_against_n_other_seed,
            r"tf32, n = 64, seed = 0: expected 0.00191916 .*, got 0.00\d+: draw a then b for each "
            r"n, in order, from torch.Generator\(\).manual_seed\(seed\)",
        ),
        ("04.2", error_against_n_fresh_draws, r"tf32, n = 128, seed = 0: expected 0.00193506"),
        ("04.2", error_against_n_as_numbers, r"n = 64: expected positive float errors, got tensor"),
        (
            "04.2",
            error_against_n_typed_fit,
            r"tf32: expected the fit of your own errors, exponent -?0.\d+ .*got exponent 0.5$",
        ),
        ("04.2", error_against_n_linear_fit, r"tf32: expected the fit of your own errors"),
        (
            "04.3",
            profiled(step_by_casting_model),
            r"0.weight: expected parameters left in float32, got torch.bfloat16",
        ),
        (
            "04.3",
            profiled(step_loss_outside_autocast),
            r"the trace: expected aten::log_softmax in float32, got \['bfloat16'\]: compute the "
            r"loss inside the autocast block",
        ),
        (
            "04.3",
            profiled(step_without_autocast),
            r"expected matmuls and convolutions in bfloat16 in the trace, got none",
        ),
        (
            "04.3",
            profiled(step_without_backward),
            r"0.weight: expected a gradient for every parameter",
        ),
        (
            "04.3",
            profiled(step_twice),
            r"0.weight: expected the gradient of one autocast step, as the check computed it on "
            r"the same batch, got other values",
        ),
        (
            "04.3",
            step_with_a_typed_trace,
            r"the trace: expected the trace of your step on the check's batch \(8 images\), "
            r"recorded with shapes, got convolutions on nothing",
        ),
        (
            "04.3",
            step_with_a_well_informed_trace,
            r"the trace: expected the operators of one autocast step, as the check's own profile "
            r"of it records \d+, got a trace without \d+ of them",
        ),
        (
            "04.3",
            step_with_the_notebooks_trace,
            r"got convolutions on \[\[16, 3, 8, 8\], ",
        ),
    ],
)
def test_wrong_answers_fail_with_a_useful_message(exercise_id, answer, message):
    result = run_check(exercise_id, answer)
    assert result.verdict == FAILED
    assert re.search(message, result.message), result.message


@pytest.mark.parametrize("exercise_id", ["04.1", "04.2", "04.3"])
def test_stub_is_not_attempted(exercise_id):
    assert run_check(exercise_id, stub).verdict == NOT_ATTEMPTED


def test_04_3_without_a_trace_is_not_attempted():
    result = run_check("04.3", step_without_a_trace)
    assert result.verdict == NOT_ATTEMPTED
    assert result.message.startswith("run your step under the profiler first")


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


def test_04_2_held_out_cases_fail_errors_kept_for_the_visible_seed(held_out_catches):
    kept = {mode: error_against_n(mode, (64, 128, 256, 512), 0) for mode in ("tf32", "bf16")}

    def table(mode, ns, seed):  # right at the visible seed and sizes, and only there
        return kept[mode]

    failure = held_out_catches("04.2", error_against_n, table, seeds=[0, 1])
    assert re.match(
        r"error_against_n\('(tf32|bf16)', \(\d+, \d+, \d+\), seed=\d+\): expected 3", failure
    )


def test_04_3_held_out_case_fails_a_trace_kept_from_the_visible_case(held_out_catches):
    kept = {}

    def keeps_its_first_trace(model, inputs, targets, trace_path):
        if not kept:
            loss = profiled(autocast_step)(model, inputs, targets, trace_path)
            kept["trace"] = Path(trace_path).read_text()
            return loss
        Path(trace_path).write_text(kept["trace"])
        return autocast_step(model, inputs, targets)

    failure = held_out_catches("04.3", profiled(autocast_step), keeps_its_first_trace, [0])
    assert "the trace: expected the trace of your step on the check's batch" in failure, failure


def test_solution_cells_raise_no_flag_and_the_course_answer_is_flagged():
    import nbformat

    from course_utils.grading.grader.plan import review_flags
    from course_utils.grading.notebooks import exercise_sources
    from course_utils.paths import REPO_ROOT

    solution = nbformat.read(REPO_ROOT / "solutions" / "04_tf32_mixed_precision.ipynb", 4)
    sources = exercise_sources(solution)
    assert set(sources) == {"04.1", "04.2", "04.3"}
    assert review_flags(sources) == []
    lazy = {
        "04.1": 'def to_tf32(x):\n    return rounded(x, "tf32")',
        "04.2": "def error_against_n(mode, ns, seed):\n    return [matmul_error(n) for n in ns]",
        "04.3": "def autocast_step(model, inputs, targets):\n"
        "    return train_one_epoch(model, loader, opt, autocast_dtype=torch.bfloat16)",
    }
    flags = review_flags(lazy)
    assert [f.split(":")[0] for f in flags] == ["04.1", "04.2", "04.3"], flags
    assert all("calls the course's own answer" in f for f in flags), flags
    also = review_flags({"04.1": "from course_utils.precision import round_to_tf32 as r"})
    assert len(also) == 1 and also[0].startswith("04.1: calls the course's own answer"), also
