"""time_fn and naive_vs_synced: values, validation, and synchronization on accelerators."""

import pytest
import torch

from course_utils import timing
from course_utils.timing import NaiveVsSynced, naive_vs_synced, time_fn


def test_time_fn_measures_a_sleep():
    import time

    t = time_fn(time.sleep, 0.01, warmup=0, min_run_time=0.05)
    assert 0.009 < t.median < 0.05
    assert t.runs >= 1 and "per call" in str(t)


def test_time_fn_clock_synchronizes_the_devices_of_the_arguments(monkeypatch):
    synced = []
    monkeypatch.setattr(timing, "synchronize", lambda d: synced.append(torch.device(d)))
    meta = torch.empty(2, device="meta")  # a non-CPU device that needs no hardware
    time_fn(lambda x: x, meta, warmup=0, min_run_time=0.01)
    assert synced and set(synced) == {torch.device("meta")}


def test_time_fn_sync_device_overrides(monkeypatch):
    synced = []
    monkeypatch.setattr(timing, "synchronize", lambda d: synced.append(str(d)))
    time_fn(lambda: None, warmup=0, min_run_time=0.01, sync_device="cpu")
    assert set(synced) == {"cpu"}


def test_time_fn_rejects_bad_settings():
    with pytest.raises(ValueError, match="min_run_time=0"):
        time_fn(lambda: None, min_run_time=0)


def test_naive_vs_synced_agree_on_the_cpu():
    x = torch.randn(128, 128)
    r = naive_vs_synced(torch.mm, x, x, repeats=7)
    assert isinstance(r, NaiveVsSynced) and r.device == "cpu" and r.repeats == 7
    assert 0.3 < r.naive / r.synced < 3  # same work, no queue: the same up to noise
    assert "naive" in str(r)


def test_naive_vs_synced_waits_only_in_the_synced_measurement(monkeypatch):
    """Simulate an asynchronous device: the call returns at once, the sync waits 20 ms."""
    import time

    pending = []
    monkeypatch.setattr(timing, "synchronize", lambda d: pending and time.sleep(pending.pop()))
    r = naive_vs_synced(lambda: pending.append(0.02), device="cpu", repeats=3, warmup=0)
    assert r.naive < 0.005 < 0.015 < r.synced


def test_naive_vs_synced_rejects_bad_settings():
    with pytest.raises(ValueError, match="repeats=0 must be >= 1"):
        naive_vs_synced(lambda: None, repeats=0)


@pytest.mark.gpu
def test_naive_timing_on_gpu_misses_the_work():
    a = torch.randn(4096, 4096, device="cuda")
    r = naive_vs_synced(torch.mm, a, a, device="cuda", repeats=5)
    assert r.naive < r.synced / 2
    t = time_fn(torch.mm, a, a, min_run_time=0.2)
    assert t.median == pytest.approx(r.synced, rel=0.5)


def test_copy_bandwidth_is_bytes_over_the_median(monkeypatch):
    calls = []

    def fake_time_fn(fn, **kwargs):
        calls.append((fn(), kwargs))
        return timing.Timing(median=0.002, iqr=0.0, runs=1, number_per_run=1)

    monkeypatch.setattr(timing, "time_fn", fake_time_fn)
    src = torch.ones(1_000_000)  # 4 MB
    assert timing.copy_bandwidth(src, "cpu") == pytest.approx(4e6 / 0.002 / 1e9)
    copied, kwargs = calls[0]
    assert torch.equal(copied, src) and copied.data_ptr() != src.data_ptr()  # a real copy
    assert kwargs["sync_device"] == torch.device("cpu")


def test_copy_bandwidth_synchronizes_the_target_device(monkeypatch):
    synced = []
    monkeypatch.setattr(timing, "synchronize", lambda d: synced.append(torch.device(d)))
    gbs = timing.copy_bandwidth(torch.ones(1024), "meta", non_blocking=True, min_run_time=0.01)
    assert gbs > 0 and set(synced) == {torch.device("meta")}


def test_copy_bandwidth_on_the_cpu_measures_a_host_copy():
    assert 0.01 < timing.copy_bandwidth(torch.ones(2**20), "cpu", min_run_time=0.05) < 1e4
