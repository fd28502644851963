"""Lesson 04's probes: what its checks hand the learner's code, in the learner's process.

04.2's probe calls the learner's error measurement at the judge's seed and reports the errors and
the fitted exponent as plain numbers (a PowerLaw is the course's class: it does not cross to the
judge). 04.3's probe hands the learner's profiled step a small CNN and a batch the judge drew,
and reports the step's loss, the parameters' dtypes and gradients, and the Chrome trace the
learner's code exported (its text). The judge measures and steps the same itself
(checks/lesson04.py).
"""

import tempfile
from pathlib import Path

import torch

from course_utils.grading import probe
from course_utils.profiling import quiet_profiler_warnings

# ---- 04.2 ---------------------------------------------------------------------------------


@probe("04.2")
def run_error_against_n(error_against_n, mode: str, ns: tuple, seed: int):
    got = error_against_n(mode, tuple(ns), seed)
    if not (isinstance(got, tuple) and len(got) == 2):
        return {"returned": type(got).__name__}
    errors, fit = got
    return {
        "errors": list(errors) if isinstance(errors, (list, tuple)) else type(errors).__name__,
        "exponent": getattr(fit, "exponent", None),
        "fit": type(fit).__name__,
    }


# ---- 04.3 ---------------------------------------------------------------------------------

SIDE = 8  # the images' height and width


def small_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * (SIDE - 2) ** 2, 5),
    )


def batch_of(batch: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(batch, 3, SIDE, SIDE, generator=generator)
    return inputs, torch.randint(0, 5, (batch,), generator=generator)


def _plain(t):
    return t.detach().as_subclass(torch.Tensor).clone() if isinstance(t, torch.Tensor) else None


@probe("04.3")
def run_profiled_step(profile_autocast_step, batch: int, seed: int):
    model, (inputs, targets) = small_model(seed), batch_of(batch, seed)
    with tempfile.TemporaryDirectory(prefix="course-04.3-") as tmp:
        path = Path(tmp) / "autocast_step.json"
        with quiet_profiler_warnings():  # a PyTorch release's note, not the learner's output
            loss = profile_autocast_step(model, inputs, targets, path)
        trace = path.read_text(errors="replace") if path.is_file() else None
    return {
        "loss": _plain(loss) if isinstance(loss, torch.Tensor) else type(loss).__name__,
        "params": {name: p.dtype for name, p in model.named_parameters()},
        "grads": {name: _plain(p.grad) for name, p in model.named_parameters()},
        "trace": trace,
    }
