"""Checkers of lesson 04, TF32 and mixed precision. All run on a CPU.

04.1 compares bit patterns with precision.round_to_tf32.
04.2 runs the learner's error measurement on this machine and re-measures each point itself
     (precision.matmul_error, other random matrices: within a factor of 3); the exponent must be
     the least-squares fit of the learner's own errors.
04.3 profiles the learner's training step under autocast and reads the exported trace: which
     operators ran in bfloat16 and which in float32 (profiling.dtypes_by_operator); the
     weights and their gradients must stay float32.
"""

import functools
import math
import tempfile
from pathlib import Path

import torch

from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out
from course_utils.precision import ROUNDINGS, matmul_error, power_law_fit, round_to_tf32
from course_utils.profiling import dtypes_by_operator, profile_call, read_trace


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


@exercise("04.1", "round float32 to TF32, bit-exactly")
def check_round_to_tf32(answer):
    gen = torch.Generator().manual_seed(4)
    scale = 10.0 ** torch.randint(-40, 38, (1000,), generator=gen)
    random = torch.randn(1000, generator=gen) * scale
    for name, x in (("special values", _special_values()), ("random values", random.float())):
        got = call_answer(answer, x.clone())
        expect(
            isinstance(got, torch.Tensor) and got.dtype == torch.float32,
            "a float32 tensor",
            getattr(got, "dtype", type(got).__name__),
        )
        want = round_to_tf32(x)
        same = got.view(torch.int32) == want.view(torch.int32)
        if not bool(same.all()):
            i = int((~same).nonzero()[0])
            expect(
                False,
                f"{_hex(want[i : i + 1])[0]}",
                f"{_hex(got[i : i + 1])[0]}",
                f"{name}: input {_hex(x[i : i + 1])[0]}",
            )
    nan = call_answer(answer, torch.tensor([float("nan")]))
    expect(bool(torch.isnan(nan).all()), "nan to stay nan", nan.tolist())
    return "round to nearest even on the bit pattern, ties, subnormals, overflow, inf and nan"


_SIZES = (64, 128, 256, 512)
_measured = functools.cache(matmul_error)  # deterministic: each of the check's points once
_CLOSE = 3.0  # other random matrices: the error at one n varies by up to about 1.7x


def _errors(got, mode: str) -> list[float]:
    what = f"error_against_n({mode!r}, {_SIZES})"
    expect(isinstance(got, tuple) and len(got) == 2, "a tuple (errors, fit)", repr(got), what)
    errors = list(got[0])
    expect(len(errors) == len(_SIZES), f"{len(_SIZES)} errors, one per n", len(errors), what)
    for n, err in zip(_SIZES, errors):
        fine = isinstance(err, float) and math.isfinite(err) and err > 0
        expect(fine, "positive float errors", repr(err), f"{what}, n = {n}")
    return errors


def _compare_point(mode: str, n: int, err: float) -> None:
    if _measured(n, mode) / _CLOSE <= err <= _measured(n, mode) * _CLOSE:
        return
    mine = {m: _measured(n, m) for m in ROUNDINGS}
    nearest = min(ROUNDINGS, key=lambda m: abs(math.log(err / mine[m])))
    hint = (
        f": that is about {nearest}'s error; round both float32 inputs as {mode} reads them"
        if nearest != mode
        else ": use randn matrices, float64 for the exact product, max|C - C64| / mean|C64|"
    )
    raise CheckFailed(
        f"{mode}, n = {n}: expected about {mine[mode]:.2g} (re-measured by the check), got "
        f"{err:.2g}{hint}"
    )


@exercise("04.2", "measure TF32 and bf16 error against n and fit the exponent")
def check_error_against_n(error_against_n):
    for mode in ("tf32", "bf16"):
        got = call_answer(error_against_n, mode, _SIZES)
        errors = _errors(got, mode)
        for n, err in zip(_SIZES, errors):
            _compare_point(mode, n, err)
        want = power_law_fit(_SIZES, errors).exponent
        exponent = getattr(got[1], "exponent", None)
        expect(
            isinstance(exponent, float) and abs(exponent - want) < 1e-6,
            f"the fit of your own errors, exponent {want:.3f} (power_law_fit(ns, errors))",
            f"exponent {exponent!r}",
            mode,
        )
    return (
        "your tf32 and bf16 errors at n = 64 to 512 agree with the check's own measurements on "
        "this CPU, and each exponent is fitted to your measurements"
    )


_MATMULS = ("aten::addmm", "aten::mm", "aten::linear", "aten::conv2d", "aten::convolution")
_LOSS = ("aten::log_softmax", "aten::_log_softmax", "aten::nll_loss", "aten::nll_loss_forward")


def _small_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 5)
    )


def _traced_step(autocast_step, model, inputs, targets) -> tuple[object, dict[str, set[str]]]:
    with tempfile.TemporaryDirectory(prefix="course-04.3-") as tmp:
        path = Path(tmp) / "autocast_step.json"
        loss = []
        profile_call(lambda: loss.append(autocast_step(model, inputs, targets)), trace_path=path)
        return loss[0], dtypes_by_operator(read_trace(path))


@exercise("04.3", "a training step under autocast, read from its profile")
def check_autocast_step(autocast_step):
    model = _small_model()
    inputs, targets = torch.randn(8, 3, 8, 8), torch.randint(0, 5, (8,))
    loss, dtypes = _traced_step(autocast_step, model, inputs, targets)
    for name, p in model.named_parameters():
        expect(p.dtype == torch.float32, "parameters left in float32", p.dtype, name)
        expect(
            p.grad is not None,
            "a gradient for every parameter (call loss.backward())",
            "none",
            name,
        )
        expect(p.grad.dtype == torch.float32, "float32 gradients", p.grad.dtype, name)
    low = sorted(op for op in _MATMULS if "bfloat16" in dtypes.get(op, ()))
    expect(
        bool(low),
        "matmuls and convolutions in bfloat16 in the trace",
        "none: run the forward pass inside torch.autocast('cpu', dtype=torch.bfloat16)",
    )
    for op in _LOSS:
        expect(
            dtypes.get(op, {"float32"}) <= {"float32"},
            f"{op} in float32",
            f"{sorted(dtypes[op])}: compute the loss inside the autocast block, which runs "
            "it in float32",
            "the trace",
        )
    expect(
        isinstance(loss, torch.Tensor) and loss.dtype == torch.float32,
        "the loss returned, in float32",
        getattr(loss, "dtype", repr(loss)),
    )
    return (
        "your step's trace: matmuls and convolutions in bfloat16, the loss in float32; the "
        "weights and their gradients stay float32"
    )


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("04.1", cases=2)
def held_out_round_to_tf32(rng, answer):
    """Other random values: outputs kept for the visible inputs (a table) fail them."""
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    scale = 10.0 ** torch.randint(-40, 38, (500,), generator=gen)
    x = (torch.randn(500, generator=gen) * scale).float()
    got = call_answer(answer, x.clone())
    shaped = isinstance(got, torch.Tensor) and got.dtype == torch.float32 and got.shape == x.shape
    expect(shaped, "a float32 tensor of the input's shape", getattr(got, "dtype", type(got)))
    want = round_to_tf32(x)
    same = got.view(torch.int32) == want.view(torch.int32)
    if not bool(same.all()):
        i = int((~same).nonzero()[0])
        expect(
            False,
            _hex(want[i : i + 1])[0],
            _hex(got[i : i + 1])[0],
            f"input {_hex(x[i : i + 1])[0]}",
        )
