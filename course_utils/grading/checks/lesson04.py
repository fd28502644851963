"""Checkers of lesson 04, TF32 and mixed precision. All run on a CPU."""

import torch
import torch.nn.functional as F

from course_utils.grading import call_answer, exercise, expect, held_out
from course_utils.precision import matmul_error, round_to_tf32


def _special_values() -> torch.Tensor:
    patterns = [
        0x3F800000, 0x3F801000, 0x3F803000, 0x3F802FFF, 0x3F801001,  # 1, ties, near ties
        0xBF803000, 0x00001000, 0x00003000, 0x007FFFFF, 0x80000FFF,  # negative, subnormals
        0x7F7FFFFF, 0x7F7FEFFF, 0x7F800000, 0xFF800000, 0x00000000, 0x80000000,  # max, inf, zeros
    ]  # fmt: skip
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


@exercise("04.2", "choose the precision mode that meets an error bound")
def check_choose_precision(choose_precision):
    n = 256
    errors = {mode: matmul_error(n, mode) for mode in ("bf16", "tf32", "ieee")}
    cases = [  # (bound, fastest mode whose error is within the bound)
        (5 * errors["bf16"], "bf16"),
        (2 * errors["tf32"], "tf32"),
        (0.5 * errors["tf32"], "ieee"),
        (2 * errors["ieee"], "ieee"),
    ]
    for bound, want in cases:
        got = call_answer(choose_precision, bound, n)
        expect(got == want, repr(want), repr(got), f"choose_precision({bound:.2g}, n={n})")
    got = call_answer(choose_precision, 0.1 * errors["ieee"], n)
    expect(
        got is None,
        "None (no mode is accurate enough)",
        repr(got),
        f"choose_precision({0.1 * errors['ieee']:.2g}, n={n})",
    )
    return "picks the fastest of bf16, tf32, ieee whose measured error meets the bound"


@exercise("04.3", "a forward pass under autocast")
def check_autocast_loss(autocast_loss):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))
    inputs, targets = torch.randn(16, 20), torch.randint(0, 5, (16,))
    got = call_answer(autocast_loss, model, inputs, targets)
    expect(isinstance(got, tuple) and len(got) == 2, "a tuple (logits, loss)", type(got).__name__)
    logits, loss = got
    expect(
        logits.dtype == torch.bfloat16,
        "logits in torch.bfloat16 (Linear runs in bf16)",
        logits.dtype,
        "autocast on the CPU",
    )
    expect(
        loss.dtype == torch.float32,
        "the loss in torch.float32 (autocast runs it in fp32)",
        loss.dtype,
    )
    logits, loss = logits.detach(), loss.detach()
    want = F.cross_entropy(logits.float(), targets)
    expect(
        torch.allclose(loss, want, atol=1e-4),
        f"loss {float(want):.4f}",
        f"{float(loss):.4f}",
        "cross entropy of the logits",
    )
    for p in model.parameters():
        expect(p.dtype == torch.float32, "parameters left in float32", p.dtype)
    return "bf16 matmuls, fp32 loss, fp32 weights: autocast did the casting"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("04.2", cases=3)
def held_out_choose_precision(rng, choose_precision):
    """Other sizes and bounds: answers typed in for the visible bounds fail them."""
    n = rng.choice([64, 96, 128, 192])
    errors = {mode: matmul_error(n, mode) for mode in ("bf16", "tf32", "ieee")}
    bound, want = rng.choice([(rng.uniform(2, 8) * errors["bf16"], "bf16"),
                              (rng.uniform(1.2, 3) * errors["tf32"], "tf32"),
                              (rng.uniform(0.2, 0.8) * errors["tf32"], "ieee"),
                              (rng.uniform(0.01, 0.5) * errors["ieee"], None)])  # fmt: skip
    got = call_answer(choose_precision, bound, n)
    expect(got == want, repr(want), repr(got), f"choose_precision({bound:.3g}, n={n})")
