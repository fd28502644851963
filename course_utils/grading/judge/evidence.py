"""What a probe reports about the learner's objects, as plain data for the judge.

A probe (grading/probes/) runs in the learner's process and can look at what only that
process holds: whether two tensors share memory, what a `torch.utils.benchmark` Measurement
timed, which device a tensor is on. These helpers turn such facts into plain values. What they
report comes from the learner's process; the checkers hold it against inputs and measurements
of the judge's own (README, "Grading").
"""

from __future__ import annotations

import torch
from torch.utils.benchmark.utils.common import Measurement


def measurement(m) -> dict | None:
    """A Measurement as plain data (its statement, block times, runs per block), or None for
    anything else: a number typed in, a hand-made object, a Measurement subclass."""
    if type(m) is not Measurement or not m.times:
        return None
    return {
        "stmt": str(m.task_spec.stmt),
        "times": [float(t) for t in m.times],
        "median": float(m.median),
        "number_per_run": int(m.number_per_run),
    }


def storage(t) -> int | None:
    """The address of a tensor's memory (None for anything that is not a tensor)."""
    if not isinstance(t, torch.Tensor):
        return None
    return int(t.untyped_storage().data_ptr())


def outcome(fn, *args) -> dict:
    """`fn(*args)` as plain data: {"value": ...} or {"raised": "TypeError: ..."}; a stub's
    NotImplementedError goes on (the check says "not attempted")."""
    try:
        return {"value": fn(*args)}
    except NotImplementedError:
        raise
    except Exception as e:  # the learner's code may raise anything: reported as it came
        return {"raised": f"{type(e).__name__}: {e}"[:300]}


class ReportsCuda(torch.Tensor):
    """A CPU tensor that says it is on cuda:0 and, as a GPU tensor would, refuses `.numpy()`
    until it is copied to the CPU: a GPU's behaviour for this answer, tested without a GPU."""

    @property
    def device(self):
        return torch.device("cuda", 0)

    @property
    def is_cuda(self):
        return True

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "numpy" and not kwargs.get("force"):
            raise TypeError(
                "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                "tensor to host memory first."
            )
        if name in ("cpu", "numpy") or (
            name == "to" and "cpu" in map(str, (*args, *kwargs.values()))
        ):
            plain = args[0].as_subclass(torch.Tensor).detach().clone()
            return plain.numpy() if name == "numpy" else plain
        result = super().__torch_function__(func, types, args, kwargs)
        return result
