"""interop: the routes compute the same pair; TorchScript's deprecation comes back as one line."""

import torch

from course_utils import interop


def _inputs(n=16):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, n, generator=g), torch.randn(n, n, generator=g), torch.eye(n) * 0.5


def test_every_route_computes_the_same_pair():
    a, b, w = _inputs()
    want = interop.sequential(a, b, w)
    for name, route in interop.ROUTES.items():
        got = route(a, b, w)
        assert all(torch.allclose(g, x, atol=1e-6) for g, x in zip(got, want)), name


def test_chain_is_the_work_it_says():
    a, _, w = _inputs(4)
    assert torch.allclose(interop.chain(a, w, steps=1), torch.tanh(a @ w))


def test_scripted_fork_compiles_once_and_reports_the_deprecation_as_one_line():
    first, note = interop.scripted_fork()
    again, same_note = interop.scripted_fork()
    assert first is again and note == same_note
    assert "deprecated" in note and "\n" not in note  # PyTorch 2.5+ deprecates TorchScript
