"""Checkers of lesson 01, tensors."""

import numpy as np
import torch

from course_utils.grading import call_answer, exercise, expect, held_out


@exercise("01.2", "standardize the columns of a matrix with broadcasting")
def check_standardize(standardize):
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
    return "every column now has mean 0 and standard deviation 1"


@exercise("01.1", "flatten a batch of images without copying")
def check_flatten(batch_flatten):
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
    return "(8, 3, 4, 4) -> (8, 48) as a view of the same memory"


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
    expect(right, shown, got.tolist() if isinstance(got, torch.Tensor) else repr(got),
           f"gradient of sum(x**3 + 2x) at x={points}")  # fmt: skip
