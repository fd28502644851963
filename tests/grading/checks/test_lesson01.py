"""Lesson 01 checkers: pass on the reference, fail with a useful message on known-wrong answers."""

from course_utils.grading import run_check


def test_flatten():
    assert run_check("01.1", lambda x: x.flatten(1)).passed
    copy = run_check("01.1", lambda x: x.flatten(1).clone())
    assert copy.verdict == "failed" and "a copy (different data_ptr)" in copy.message
    wrong_shape = run_check("01.1", lambda x: x.flatten())
    assert wrong_shape.message == "expected shape (8, 48), got shape (384,)"


def test_standardize():
    assert run_check("01.2", lambda x: (x - x.mean(0)) / x.std(0, unbiased=False)).passed
    rows = run_check("01.2", lambda x: (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True))
    assert rows.verdict == "failed" and "each column with mean 0 and std 1" in rows.message


def test_to_numpy():
    assert run_check("01.3", lambda t: t.detach().cpu().numpy()).passed
    no_detach = run_check("01.3", lambda t: t.numpy())
    assert no_detach.verdict == "failed" and "RuntimeError" in no_detach.message
    copies = run_check("01.3", lambda t: t.detach().clone().numpy())
    assert "sharing memory" in copies.message


def test_gradient():
    def reference(x):
        x = x.clone().requires_grad_()
        (x**3 + 2 * x).sum().backward()
        return x.grad

    assert run_check("01.4", reference).passed
    wrong = run_check("01.4", lambda x: 3 * x**2)
    assert wrong.message.startswith("gradient of sum(x**3 + 2x): expected [5.0, 14.0, 29.0]")
    assert run_check("01.4", lambda x: (_ for _ in ()).throw(NotImplementedError)).verdict == (
        "not attempted yet"
    )


# ---- held-out cases ------------------------------------------------------------------------


def test_01_4_held_out_cases_fail_the_visible_gradient_typed_in(held_out_catches):

    import torch

    def reference(x):
        x = x.clone().requires_grad_()
        (x**3 + 2 * x).sum().backward()
        return x.grad

    def typed_in(x):
        return torch.tensor([5.0, 14.0, 29.0])

    failure = held_out_catches("01.4", reference, typed_in)
    assert (
        failure.startswith("gradient of sum(x**3 + 2x) at x=[")
        and "got [5.0, 14.0, 29.0]" in failure
    )
