"""Checkers of lesson 01, tensors.

01.1 and 01.2 are measurements: the learner's function times its own work with
torch.utils.benchmark on tensors the check makes, and the check reads what that run produced
(the tensors' memory, the Measurements), never a figure typed in.
"""

import numpy as np
import torch
from torch.utils.benchmark.utils.common import Measurement

from course_utils.grading import call_answer, exercise, expect, held_out


def _is_measurement(m) -> bool:
    return isinstance(m, Measurement) and len(m.times) > 0 and m.median > 0


def _records(records, keys, what):
    expect(
        isinstance(records, dict), f"a dict with {', '.join(keys)}", type(records).__name__, what
    )
    missing = [k for k in keys if k not in records]
    expect(not missing, f"the keys {', '.join(keys)}", f"no {', '.join(missing)}", what)
    for key in keys:
        if key.endswith("_time"):
            expect(
                _is_measurement(records[key]),
                f"{key} measured by torch.utils.benchmark (Timer(...).blocked_autorange())",
                repr(records[key])[:80],
                what,
            )


# Large enough that a copy costs far more than a view's bookkeeping, small enough to be quick.
BATCH = (64, 3, 64, 64)


def verify_view_and_copy(images: torch.Tensor, records) -> str:
    what = f"view_and_copy_costs on a batch of shape {tuple(images.shape)}"
    _records(records, ("view", "copy", "view_time", "copy_time"), what)
    view, copy = records["view"], records["copy"]
    memory = images.untyped_storage().data_ptr()
    expect(
        view.untyped_storage().data_ptr() == memory,
        "'view' sharing the input's memory",
        "a tensor with memory of its own",
        what,
    )
    expect(
        copy.untyped_storage().data_ptr() != memory,
        "'copy' in memory of its own (.clone())",
        "a tensor sharing the input's",
        what,
    )
    expect(torch.equal(view, copy), "'view' and 'copy' with equal values", "different values", what)
    extra = copy.untyped_storage().nbytes()
    expect(extra == images.nbytes, f"a copy of {images.nbytes:,} bytes", f"{extra:,}", what)
    ratio = records["copy_time"].median / records["view_time"].median
    expect(
        ratio > 3,
        "the copy several times slower than the view (it moves every byte)",
        "a copy about as fast as the view: time the copy itself, not a view",
        what,
    )
    return f"the view shares the batch's {images.nbytes:,} bytes; the copy takes as many again"


@exercise("01.1", "flatten a batch without copying, and measure what a copy costs")
def check_flatten(batch_flatten, view_and_copy_costs):
    x = torch.randn(8, 3, 4, 4)
    got = call_answer(batch_flatten, x)
    expect(tuple(got.shape) == (8, 48), "shape (8, 48)", f"shape {tuple(got.shape)}")
    expect(
        got.data_ptr() == x.data_ptr(),
        "a view sharing the input's memory",
        "a copy (different data_ptr); use .view, .reshape or .flatten(1), not .clone()",
    )
    expect(
        torch.equal(got[3], x[3].reshape(-1)), "row 3 equal to image 3 flattened", "other values"
    )
    images = torch.randn(BATCH)
    return verify_view_and_copy(images, call_answer(view_and_copy_costs, images))


# A wide matrix: a Python loop pays once per column, broadcasting once in all.
COLUMNS = (1000, 300)


def verify_broadcast_vs_loop(x: torch.Tensor, records) -> str:
    what = f"broadcast_vs_loop on a {tuple(x.shape)} matrix"
    _records(records, ("result", "broadcast_time", "loop_time"), what)
    want = (x - x.mean(dim=0)) / x.std(dim=0, unbiased=False)
    got = records["result"]
    expect(
        isinstance(got, torch.Tensor)
        and got.shape == x.shape
        and torch.allclose(got, want, atol=1e-4),
        "'result': x standardized by column",
        "other values",
        what,
    )
    ratio = records["loop_time"].median / records["broadcast_time"].median
    expect(
        ratio > 1.5,
        "the loop over columns slower than broadcasting",
        "a loop as fast as broadcasting: time a Python loop over the columns",
        what,
    )
    return f"broadcasting beats a loop over {x.shape[1]} columns, measured by torch.utils.benchmark"


@exercise("01.2", "standardize columns with broadcasting, measured against a loop")
def check_standardize(standardize, broadcast_vs_loop):
    x = torch.arange(12.0).reshape(4, 3) ** 1.5
    got = call_answer(standardize, x.clone())
    expect(isinstance(got, torch.Tensor), "a tensor", type(got).__name__)
    expect(got.shape == x.shape, f"shape {tuple(x.shape)}", f"shape {tuple(got.shape)}")
    want = (x - x.mean(dim=0)) / x.std(dim=0, unbiased=False)
    expect(
        torch.allclose(got, want, atol=1e-5),
        "each column with mean 0 and std 1",
        f"column means {got.mean(0).tolist()}",
        "standardize(x)",
    )
    big = torch.randn(COLUMNS, generator=torch.Generator().manual_seed(0))
    return verify_broadcast_vs_loop(big, call_answer(broadcast_vs_loop, big.clone()))


@exercise("01.3", "a tensor to NumPy, safely")
def check_to_numpy(to_numpy):
    w = torch.linspace(0, 1, 5, requires_grad=True)
    got = call_answer(to_numpy, w * 2)
    expect(isinstance(got, np.ndarray), "a numpy.ndarray", type(got).__name__)
    expect(np.allclose(got, np.linspace(0, 2, 5)), "[0, 0.5, 1, 1.5, 2]", got.tolist())
    plain = torch.zeros(3)
    shared = call_answer(to_numpy, plain)
    plain[0] = 7.0
    expect(shared[0] == 7.0, "an array sharing memory with a CPU tensor", "a copy (use .numpy())")
    return "works on tensors that require grad, and shares memory on the CPU"


@exercise("01.4", "a gradient with autograd")
def check_gradient(grad_of_loss):
    x = torch.tensor([1.0, -2.0, 3.0])
    got = call_answer(grad_of_loss, x.clone())
    want = 3 * x**2 + 2.0
    expect(isinstance(got, torch.Tensor), "a tensor", type(got).__name__)
    expect(torch.allclose(got, want), want.tolist(), got.tolist(), "gradient of sum(x**3 + 2x)")
    return "d/dx sum(x^3 + 2x) = 3x^2 + 2, computed by autograd"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("01.4", cases=3)
def held_out_gradient(rng, grad_of_loss):
    """Other points: the visible gradient [5.0, 14.0, 29.0] typed in fails them."""
    points = [round(rng.uniform(-3, 3), 2) for _ in range(rng.randint(2, 6))]
    x = torch.tensor(points)
    got = call_answer(grad_of_loss, x.clone())
    want = 3 * x**2 + 2.0
    right = isinstance(got, torch.Tensor) and got.shape == want.shape and torch.allclose(got, want)
    shown = [round(v, 4) for v in want.tolist()]
    expect(
        right,
        shown,
        got.tolist() if isinstance(got, torch.Tensor) else repr(got),
        f"gradient of sum(x**3 + 2x) at x={points}",
    )
