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


def test_call_spread_orders_its_figures_and_restores_the_thread_count():
    before = torch.get_num_threads()
    x = torch.randn(64, 64)
    s = timing.call_spread(torch.mm, x, x, calls=9, num_threads=1)
    assert s.calls == 9 and 0 < s.fastest <= s.median <= s.slowest
    assert torch.get_num_threads() == before
    assert str(s).startswith("single calls: fastest ")


def test_call_spread_rejects_bad_settings():
    with pytest.raises(ValueError, match="calls=0 must be >= 1"):
        timing.call_spread(lambda: None, calls=0)


def test_cpu_pressure_reads_the_some_line(tmp_path):
    psi = tmp_path / "cpu"
    psi.write_text("some avg10=96.57 avg60=83.48 avg300=38.93 total=1\nfull avg10=0.00 total=0\n")
    assert timing._cpu_pressure(str(psi)) == pytest.approx(0.9657)
    assert timing._cpu_pressure(str(tmp_path / "absent")) is None


def test_cpu_load_says_whether_other_work_competes():
    busy = timing.CpuLoad(load_1min=5.2, cpus=2, waiting=0.97)
    quiet = timing.CpuLoad(load_1min=1.9, cpus=2, waiting=0.01)
    assert busy.contended and not quiet.contended
    assert str(busy) == (
        "load average 5.2 on 2 CPUs, tasks waited for a CPU 97% of the last 10 s: "
        "other work competes for these CPUs"
    )
    assert timing.CpuLoad(3.0, 2, None).contended  # without pressure figures: load > CPUs
    assert isinstance(timing.cpu_load(), timing.CpuLoad)


def _simulated_loop(host=0.004, per_image=0.00025, first=0.5):
    from course_utils.async_gpu.async_model import SimulatedDevice, SimulatedTrainStep

    device = SimulatedDevice(launch_overhead=0.0)
    return device, SimulatedTrainStep(device, host, per_image, first)


def test_images_per_second_times_only_the_steady_state_of_a_device_bound_loop():
    device, step = _simulated_loop()
    batches = [range(64)] * 11 + [range(32)]
    rate = timing.images_per_second(step, batches, device.synchronize, device.clock, warmup=2)
    # idle device at the start: the first timed step's host work (4 ms), then the device
    # works back to back: 9 batches of 64 (16 ms each) and one of 32 (8 ms)
    assert rate == pytest.approx((9 * 64 + 32) / (0.004 + 9 * 0.016 + 0.008))
    assert step.calls == 12


def test_images_per_second_of_a_host_bound_loop_counts_the_last_queued_work():
    device, step = _simulated_loop(host=0.02, per_image=0.0001)
    rate = timing.images_per_second(step, [range(64)] * 6, device.synchronize, device.clock, 1)
    assert rate == pytest.approx(5 * 64 / (5 * 0.02 + 0.0064))


def test_images_per_second_counts_the_inputs_of_tuple_batches_and_checks_warmup():
    batches = [(torch.zeros(8, 3), torch.zeros(8))] * 3
    one_second = iter([0.0, 1.0]).__next__  # the clock: start, then stop one second later
    rate = timing.images_per_second(lambda b: None, batches, lambda: None, one_second, warmup=1)
    assert rate == 16  # two timed batches of 8 images, not 2 items per tuple
    with pytest.raises(ValueError, match="warmup=3 must leave batches to time: got 3 batches"):
        timing.images_per_second(lambda b: None, batches, warmup=3)


def test_suggest_threads_uses_one_thread_only_when_other_work_competes():
    assert timing.suggest_threads(timing.CpuLoad(5.2, 2, 0.97), allocated=2) == 1
    assert timing.suggest_threads(timing.CpuLoad(1.9, 2, 0.01), allocated=2) == 2
    with pytest.raises(ValueError, match="allocated=0 CPUs"):
        timing.suggest_threads(timing.CpuLoad(0.0, 2, 0.0), allocated=0)


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
