"""The toy asynchronous device, its events and its log behave like the rules they model."""

import re

import pytest

from course_utils.async_gpu.async_model import (
    SimulatedDevice,
    SimulatedTrainStep,
    log_lines,
    timing_problems,
)


def test_launch_returns_before_the_work_and_synchronize_waits():
    dev = SimulatedDevice(launch_overhead=1e-5)
    dev.launch(0.5)
    assert dev.clock() == 1e-5  # the host only paid the launch
    dev.synchronize()
    assert dev.clock() == 0.5 + 1e-5
    dev.synchronize()  # an idle device: no wait
    assert dev.clock() == 0.5 + 1e-5


def test_queued_work_runs_back_to_back():
    dev = SimulatedDevice(launch_overhead=0.0)
    k = dev.kernel(0.1)
    k(), k(), k()
    dev.synchronize()
    assert abs(dev.clock() - 0.3) < 1e-12


def test_host_work_moves_only_the_host_clock():
    dev = SimulatedDevice(launch_overhead=0.0)
    dev.launch(0.1)
    dev.host(0.04)  # overlaps the queued kernel
    assert dev.clock() == pytest.approx(0.04)
    dev.synchronize()
    assert dev.clock() == pytest.approx(0.1)


def test_train_step_pays_its_first_call_once_and_pipelines_with_the_device():
    dev = SimulatedDevice(launch_overhead=0.0)
    step = SimulatedTrainStep(
        dev, host_seconds=0.001, device_seconds_per_image=0.001, first_call_seconds=0.5
    )
    step(range(10))  # host 0.5 + 0.001, then 10 ms queued
    assert dev.clock() == pytest.approx(0.501) and step.calls == 1
    step(range(10)), step(range(10))  # device-bound: the host runs ahead of the queue
    assert dev.clock() == pytest.approx(0.503)
    dev.synchronize()
    assert dev.clock() == pytest.approx(0.501 + 0.030)


def test_the_log_records_launches_waits_and_readings():
    dev = SimulatedDevice(launch_overhead=0.5)
    dev.launch(2.0, "matmul")
    dev.clock()
    dev.synchronize()
    assert dev.log == [("launch", "matmul", 0.5, 0.5, 2.5), ("clock", 0.5, 2.5), ("sync", 2.5)]


def test_events_time_the_device_and_need_a_wait_before_elapsed_time():
    dev = SimulatedDevice(launch_overhead=0.0)
    dev.launch(1.0, "earlier")  # the start event is reached only when this is done
    start, end = dev.Event(enable_timing=True), dev.Event(enable_timing=True)
    start.record()
    dev.launch(0.25, "matmul")
    end.record()
    with pytest.raises(RuntimeError, match="device not ready.*end.synchronize"):
        start.elapsed_time(end)
    end.synchronize()
    assert start.elapsed_time(end) == pytest.approx(250.0)  # milliseconds, as CUDA's
    assert dev.clock() == pytest.approx(1.25)
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        dev.Event().elapsed_time(end)


def _timed(measure):
    """A device with 1 s of earlier work queued, `measure(dev, kernel)`'s result, the log."""
    dev = SimulatedDevice(launch_overhead=1e-3)
    dev.launch(1.0, "earlier")
    seconds = measure(dev, dev.kernel(0.25, "matmul"))
    return timing_problems(dev.log, seconds, "matmul")


def _synced(dev, kernel):
    dev.synchronize()
    start = dev.clock()
    kernel()
    dev.synchronize()
    return dev.clock() - start


def _naive(dev, kernel):
    start = dev.clock()
    kernel()
    return dev.clock() - start


def _no_first_sync(dev, kernel):
    start = dev.clock()
    kernel()
    dev.synchronize()
    return dev.clock() - start


def _events(dev, kernel, scale=1e-3):
    start, end = dev.Event(enable_timing=True), dev.Event(enable_timing=True)
    start.record()
    kernel()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * scale


def test_timing_problems_accepts_synchronized_clocks_and_events():
    assert _timed(_synced) == []
    assert _timed(_events) == []


@pytest.mark.parametrize(
    ("measure", "problem"),
    [
        (_naive, r"clock stopped 1.25 s before matmul's device work ended: synchronize"),
        (_no_first_sync, r"still busy with earlier work .*\(1 s of it were counted\)"),
        (lambda dev, k: _events(dev, k, scale=1), r"elapsed_time\(\) returns milliseconds"),
        (lambda dev, k: (k(), 0.25)[1], r"0.25 is no interval this device recorded"),
        (lambda dev, k: (dev.clock(), dev.clock())[1], r"matmul was never launched"),
        (lambda dev, k: _synced(dev, lambda: (k(), k())), r"2 calls of matmul between"),
    ],
)
def test_timing_problems_names_what_went_wrong(measure, problem):
    problems = _timed(measure)
    assert len(problems) == 1 and re.search(problem, problems[0]), problems


def test_log_lines_say_each_entry_in_words():
    dev = SimulatedDevice(launch_overhead=0.0)
    dev.launch(0.5, "matmul")
    end = dev.Event()
    end.record()
    end.synchronize()
    dev.clock()
    assert log_lines(dev.log) == [
        "launch 'matmul': queued at 0.000000, ran on the device 0.000000 to 0.500000",
        "event 1 recorded; the device reaches it at 0.500000",
        "event 1.synchronize(): the host waited until 0.500000",
        "clock() read 0.500000; the device busy until 0.500000",
    ]
