"""Fixtures shared by the tests."""

from __future__ import annotations

from pathlib import Path

import needs  # tests/ is on sys.path under pytest (no __init__.py: rootdir-relative imports)
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


def pytest_collection_modifyitems(items):
    """Tests under tests/integration start processes (launchers, builds, servers, jobs): they
    carry the `integration` marker, so `make test-unit` can leave them out."""
    for item in items:
        if "integration" in Path(str(item.path)).parts:
            item.add_marker(pytest.mark.integration)


def pytest_runtest_setup(item):
    """The one place that skips a test for missing hardware or system parts (and, in CI, fails
    it where CI installs them): markers gpu, slurm, browser, cpp, shellcheck and bwrap."""
    for marker in needs.CHECKS:
        if item.get_closest_marker(marker) is None:
            continue
        reason = needs.problem(marker)
        if reason is None:
            continue
        if marker in needs.CI_MUST_RUN and needs.in_ci():
            pytest.fail(f"CI must run this test: {reason}")
        pytest.skip(reason)
