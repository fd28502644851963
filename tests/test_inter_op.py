"""interop: the routes compute the same pair; TorchScript's deprecation comes back as one line."""

import warnings

import pytest
import torch

from course_utils import inter_op


def _inputs(n=16):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, n, generator=g), torch.randn(n, n, generator=g), torch.eye(n) * 0.5


def test_every_route_computes_the_same_pair():
    a, b, w = _inputs()
    want = inter_op.sequential(a, b, w)
    for name, route in inter_op.ROUTES.items():
        got = route(a, b, w)
        assert all(torch.allclose(g, x, atol=1e-6) for g, x in zip(got, want)), name


def test_chain_is_the_work_it_says():
    a, _, w = _inputs(4)
    assert torch.allclose(inter_op.chain(a, w, steps=1), torch.tanh(a @ w))


@pytest.fixture
def fresh_scripted_fork():
    inter_op.scripted_fork.cache_clear()
    yield
    inter_op.scripted_fork.cache_clear()


@pytest.mark.parametrize("warns", [True, False], ids=["2.14 warns", "2.6 is silent"])
def test_scripted_fork_compiles_once_and_reports_the_deprecation_as_one_line(
    warns, monkeypatch, fresh_scripted_fork
):
    """TorchScript's FutureWarning comes back as one line; where this PyTorch gives none (2.6),
    the note is empty and the lesson says so."""
    real_script = torch.jit.script

    def script(function):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # only the injected answer counts
            compiled = real_script(function)
        if warns:
            warnings.warn(
                "`torch.jit.script` is deprecated. Please switch to `torch.compile` or "
                "`torch.export`.",
                FutureWarning,
                stacklevel=2,
            )
        return compiled

    monkeypatch.setattr(torch.jit, "script", script)
    first, note = inter_op.scripted_fork()
    again, same_note = inter_op.scripted_fork()
    assert first is again and note == same_note
    a, b, w = _inputs(4)
    assert all(torch.allclose(g, x) for g, x in zip(first(a, b, w), inter_op.sequential(a, b, w)))
    if warns:
        assert note.startswith("`torch.jit.script` is deprecated") and "\n" not in note
    else:
        assert note == ""
