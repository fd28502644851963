"""Fixtures shared by the tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def fake_gpus(monkeypatch):
    """Make this process report `n` CUDA GPUs (and no MPS), to test decisions on a CPU machine.

    Only the hardware's answers are faked (torch.cuda.is_available and device_count); code that
    would then touch a GPU still fails, so tests call the deciding functions, not the work.
    """
    monkeypatch.delenv("COURSE_DEVICE", raising=False)

    def install(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        mps = getattr(torch.backends, "mps", None)
        if mps is not None:
            monkeypatch.setattr(mps, "is_available", lambda: False)

    return install


def pytest_runtest_setup(item):
    """Tests marked `gpu` run only where a CUDA GPU is found; elsewhere they skip with why."""
    if item.get_closest_marker("gpu") and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (marked gpu; `make test-gpu` runs these on a GPU node)")
