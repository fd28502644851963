"""Checkers of lesson 04, TF32 and mixed precision. All run on a CPU.

The probes (probes/lesson04.py) run the learner's code in their process and return plain data;
the judge recomputes every reference itself.
04.1 (code) calls the learner's rounding on special and random values and compares bit patterns
     with the judge's own precision.round_to_tf32.
04.2 (code) calls the learner's error measurement at a seed the judge chose; the draws are
     fixed by the seed, so the judge measures the same errors itself (deterministic rounding
     arithmetic) and requires the learner's, and the exponent fitted to them.
04.3 (run) hands the learner's profiled step a small CNN and a batch the judge drew; the learner's
     code runs the step under autocast inside the profiler and exports the trace, which the probe
     reads. The judge parses the trace itself: the step on its batch, with the operators of its
     own profile of the same step, convolutions and matmuls in bfloat16, the loss in float32
     (profiling.dtypes_by_operator); and the loss and gradients equal those of its own autocast
     step on the same model and batch. No trace: not attempted.
"""

import functools
import json
import math
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from course_utils.grading import (
    CheckFailed,
    NotAttempted,
    call_answer,
    exercise,
    expect,
    held_out,
    run_probe,
)
from course_utils.grading.checks.traces import expect_operators
from course_utils.grading.probes.lesson04 import (
    SIDE,
    batch_of,
    run_error_against_n,
    run_profiled_step,
    small_model,
)
from course_utils.precision import (
    ROUNDINGS,
    power_law_fit,
    relative_error,
    round_to_tf32,
    rounded,
)
from course_utils.profiling import dtypes_by_operator, profile_call, read_trace

# ---- 04.1 ---------------------------------------------------------------------------------


def _special_values() -> torch.Tensor:
    patterns = [
        0x3F800000,
        0x3F801000,
        0x3F803000,
        0x3F802FFF,
        0x3F801001,  # 1, ties, near ties
        0xBF803000,
        0x00001000,
        0x00003000,
        0x007FFFFF,
        0x80000FFF,  # negative, subnormals
        0x7F7FFFFF,
        0x7F7FEFFF,
        0x7F800000,
        0xFF800000,
        0x00000000,
        0x80000000,  # max, inf, zeros
    ]
    ints = torch.tensor([p - 2**32 if p >= 2**31 else p for p in patterns], dtype=torch.int32)
    return ints.view(torch.float32)


def _hex(x: torch.Tensor) -> list[str]:
    return [f"0x{v & 0xFFFFFFFF:08X}" for v in x.view(torch.int32).tolist()]


def _random_values(seed: int, count: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    scale = 10.0 ** torch.randint(-40, 38, (count,), generator=gen)
    return (torch.randn(count, generator=gen) * scale).float()


def _expect_rounded(answer, x: torch.Tensor, what: str) -> None:
    got = call_answer(answer, x.clone())
    shaped = type(got) is torch.Tensor and got.dtype == torch.float32 and got.shape == x.shape
    kind = got.dtype if type(got) is torch.Tensor else type(got).__name__
    expect(shaped, "a float32 tensor of the input's shape", kind, what)
    want = round_to_tf32(x)
    same = got.view(torch.int32) == want.view(torch.int32)
    if not bool(same.all()):
        i = int((~same).nonzero()[0])
        at = f"{what}: input {_hex(x[i : i + 1])[0]}" if what else f"input {_hex(x[i : i + 1])[0]}"
        expect(False, _hex(want[i : i + 1])[0], _hex(got[i : i + 1])[0], at)


@exercise(
    "04.1",
    "round float32 to TF32, bit-exactly",
    reference=(
        r"\brounded\s*\(",
        r"round_to_tf32\s*\(",
        r"import[^\n]*\b(rounded|round_to_tf32)\b",
    ),
)
def check_round_to_tf32(answer):
    _expect_rounded(answer, _special_values(), "special values")
    _expect_rounded(answer, _random_values(4, 1000), "random values")
    nan = call_answer(answer, torch.tensor([float("nan")]))
    right = type(nan) is torch.Tensor and bool(torch.isnan(nan).all())
    expect(right, "nan to stay nan", nan.tolist() if type(nan) is torch.Tensor else repr(nan))
    return "round to nearest even on the bit pattern, ties, subnormals, overflow, inf and nan"


# ---- 04.2 ---------------------------------------------------------------------------------

_SIZES = (64, 128, 256, 512)
_SAME = 1e-3  # the same draws give the same error; only float32 summation order may differ


def _errors(report: dict, mode: str, ns: tuple, seed: int) -> list[float]:
    what = f"error_against_n({mode!r}, {ns}, seed={seed})"
    expect("returned" not in report, "a tuple (errors, fit)", report.get("returned"), what)
    errors = report["errors"]
    expect(type(errors) is list, "errors as a list of floats", errors, what)
    expect(len(errors) == len(ns), f"{len(ns)} errors, one per n", len(errors), what)
    for n, err in zip(ns, errors):
        fine = type(err) is float and math.isfinite(err) and err > 0
        expect(fine, "positive float errors", repr(err)[:60], f"{what}, n = {n}")
    return errors


def _compare_point(mode: str, n: int, err: float, mine: dict[str, float], seed: int) -> None:
    if abs(err - mine[mode]) <= _SAME * mine[mode]:
        return
    nearest = min(ROUNDINGS, key=lambda m: abs(math.log(err / mine[m])))
    hint = (
        f": that is about {nearest}'s error; round both float32 inputs as {mode} reads them"
        if nearest != mode and abs(math.log(err / mine[nearest])) < 0.5
        else ": draw a then b for each n, in order, from torch.Generator().manual_seed(seed) "
        "(torch.randn, float64), and use max|C - C64| / mean|C64| (relative_error)"
    )
    raise CheckFailed(
        f"{mode}, n = {n}, seed = {seed}: expected {mine[mode]:.6g} (measured by the check at "
        f"the same draws), got {err:.6g}{hint}"
    )


def _expect_measured(error_against_n, mode: str, ns: tuple, seed: int) -> None:
    report = run_probe(run_error_against_n, error_against_n, mode=mode, ns=ns, seed=seed)
    errors = _errors(report, mode, ns, seed)
    mine = own_errors(tuple(ns), seed)
    for i, (n, err) in enumerate(zip(ns, errors)):
        _compare_point(mode, n, err, {m: mine[m][i] for m in ROUNDINGS}, seed)
    want = power_law_fit(ns, errors).exponent
    exponent = report["exponent"]
    expect(
        type(exponent) is float and abs(exponent - want) < 1e-6,
        f"the fit of your own errors, exponent {want:.3f} (power_law_fit(ns, errors))",
        f"exponent {exponent!r}",
        mode,
    )


@exercise(
    "04.2",
    "measure TF32 and bf16 error against n and fit the exponent",
    reference=(r"matmul_error\s*\(",),
)
def check_error_against_n(error_against_n):
    for mode in ("tf32", "bf16"):
        _expect_measured(error_against_n, mode, _SIZES, seed=0)
    return (
        "your tf32 and bf16 errors at n = 64 to 512 equal the check's own at the same draws, and "
        "each exponent is fitted to your errors"
    )


# ---- 04.3 ---------------------------------------------------------------------------------

_MATMULS = ("aten::addmm", "aten::mm", "aten::linear", "aten::conv2d", "aten::convolution")
_LOSS = ("aten::log_softmax", "aten::_log_softmax", "aten::nll_loss", "aten::nll_loss_forward")


def _events(text: str) -> list[dict]:
    try:
        events = json.loads(text)["traceEvents"]
        return [e for e in events if type(e) is dict and e.get("ph") == "X" and "dur" in e]
    except (ValueError, KeyError, TypeError) as e:
        raise CheckFailed(
            f"a Chrome trace (JSON with traceEvents), as export_chrome_trace writes it; yours "
            f"could not be read ({type(e).__name__})"
        ) from None


def _expect_the_trace(text, batch: int, mine: set[str]) -> None:
    expect(type(text) is str, "the trace's text", type(text).__name__)
    events = _events(text)
    dims = [e.get("args", {}).get("Input Dims") for e in events if e["name"] == "aten::conv2d"]
    firsts = [d[0] for d in dims if type(d) is list and d and type(d[0]) is list]
    expect(
        [batch, 3, SIDE, SIDE] in firsts,
        f"the trace of your step on the check's batch ({batch} images), recorded with shapes",
        f"convolutions on {firsts[:2] or 'nothing'}: profile the step you were given "
        "(profile_call records shapes)",
        "the trace",
    )
    expect_operators(events, mine, "one autocast step", "the trace")
    dtypes = dtypes_by_operator(events)
    expect(
        any("bfloat16" in dtypes.get(op, ()) for op in _MATMULS),
        "matmuls and convolutions in bfloat16 in the trace",
        "none: run the forward pass inside torch.autocast('cpu', dtype=torch.bfloat16)",
    )
    for op in _LOSS:
        expect(
            dtypes.get(op, {"float32"}) <= {"float32"},
            f"{op} in float32",
            f"{sorted(dtypes.get(op, ()))}: compute the loss inside the autocast block, which "
            "runs it in float32",
            "the trace",
        )


def _close(got: torch.Tensor, want: torch.Tensor) -> bool:
    if type(got) is not torch.Tensor or got.shape != want.shape or got.dtype != torch.float32:
        return False
    return float((got - want).abs().max()) <= 0.05 * float(want.abs().max()) + 1e-6


def _expect_the_step(report: dict, own_loss, own_grads) -> None:
    for name, dtype in report["params"].items():
        expect(dtype == torch.float32, "parameters left in float32", dtype, name)
    loss, grads = report["loss"], report["grads"]
    for name, grad in grads.items():
        expect(
            grad is not None, "a gradient for every parameter (call loss.backward())", "none", name
        )
        kind = grad.dtype if type(grad) is torch.Tensor else type(grad).__name__
        expect(type(grad) is torch.Tensor and grad.dtype == torch.float32, "float32", kind, name)
        expect(
            _close(grad, own_grads[name]),
            "the gradient of one autocast step, as the check computed it on the same batch",
            "other values (call the step once, backward after the autocast block)",
            name,
        )
    expect(
        type(loss) is torch.Tensor and loss.dtype == torch.float32 and loss.shape == (),
        "the loss returned, a float32 scalar tensor",
        loss.dtype if type(loss) is torch.Tensor else loss,
    )
    expect(
        abs(float(loss) - float(own_loss)) <= 0.02 * abs(float(own_loss)) + 1e-4,
        f"a loss of {float(own_loss):.4f}, as the check computed it under autocast",
        f"{float(loss):.4f}",
    )


def _expect_a_profiled_step(answer, batch: int, seed: int) -> None:
    report = run_probe(run_profiled_step, answer, batch=batch, seed=seed)
    if report["trace"] is None:
        raise NotAttempted(
            "run your step under the profiler first: export its Chrome trace to trace_path "
            "(profile_call(..., trace_path=trace_path))"
        )
    own_loss, own_grads, own_names = own_autocast_step(batch, seed)
    _expect_the_step(report, own_loss, own_grads)
    _expect_the_trace(report["trace"], batch, own_names)


@exercise(
    "04.3",
    "a training step under autocast, profiled: what ran in bfloat16",
    reference=(r"\btrain_one_epoch\s*\(", r"\b_autocast\s*\("),
)
def check_autocast_step(profile_autocast_step):
    _expect_a_profiled_step(profile_autocast_step, batch=8, seed=0)
    return (
        "your step's trace: matmuls and convolutions in bfloat16, the loss in float32; the "
        "weights and their gradients stay float32, with the check's own loss and gradients"
    )


@functools.cache
def own_errors(ns: tuple, seed: int) -> dict[str, tuple[float, ...]]:
    """The errors at the learner's draws, measured by the judge, for each way of rounding: for
    each n, a then b from one generator seeded with `seed`, inputs rounded as the mode reads
    them, their float32 product against the float64 one."""
    generator = torch.Generator().manual_seed(seed)
    errors = {mode: [] for mode in ROUNDINGS}
    for n in ns:
        a = torch.randn(n, n, dtype=torch.float64, generator=generator)
        b = torch.randn(n, n, dtype=torch.float64, generator=generator)
        exact = a @ b
        for mode in ROUNDINGS:
            product = rounded(a.float(), mode) @ rounded(b.float(), mode)
            errors[mode].append(relative_error(product, exact))
    return {mode: tuple(found) for mode, found in errors.items()}


def own_autocast_step(batch: int, seed: int):
    """The judge's step on the same model and batch, profiled: its loss, its gradients and the
    names of the operators its trace records."""
    model, (inputs, targets) = small_model(seed), batch_of(batch, seed)
    losses = []

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            losses.append(F.cross_entropy(model(inputs), targets))
        losses[-1].backward()

    with tempfile.TemporaryDirectory(prefix="course-04.3-judge-") as tmp:
        path = Path(tmp) / "trace.json"
        profile_call(step, trace_path=path)
        names = {e["name"] for e in read_trace(path) if e.get("cat") == "cpu_op"}
    grads = {name: p.grad for name, p in model.named_parameters()}
    return losses[0].detach(), grads, names


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("04.1", cases=2)
def held_out_round_to_tf32(rng, answer):
    """Other random values: outputs kept for the visible inputs (a table) fail them."""
    _expect_rounded(answer, _random_values(rng.randrange(2**31), 500), "")


@held_out("04.2", cases=2)
def held_out_error_against_n(rng, error_against_n):
    """Another seed and other sizes: errors typed in (or drawn at a seed of one's own) fail."""
    ns = tuple(sorted(rng.sample([32, 48, 96, 160, 200, 320], 3)))
    _expect_measured(error_against_n, rng.choice(["tf32", "bf16"]), ns, rng.randint(1, 10**6))


@held_out("04.3", cases=1)
def held_out_autocast_step(rng, profile_autocast_step):
    """Another batch: a trace kept from the visible case (or typed in) fails it."""
    _expect_a_profiled_step(profile_autocast_step, rng.choice([4, 6, 12, 16]), rng.randint(1, 99))
