"""Lesson 03's references: the judge's own runs of what the learner's code ran.

On the judge's own simulated devices, the two right timings of 03.1 (synchronized, CUDA events)
and the course's measurement of 03.3's loop; the same training step as 03.4's, timed and
profiled by the judge. The probes that hand the learner's code the same things are in
probes/lesson03.py.
"""

import tempfile
from pathlib import Path

from torch.utils import benchmark

from course_utils import timing
from course_utils.grading.checks.traces import trace_events
from course_utils.grading.probes.lesson03 import _device, measure_rate, training_step
from course_utils.profiling import profile_call


def _synchronized(fn, device, clock):
    device.synchronize()
    start = clock()
    fn()
    device.synchronize()
    return clock() - start


def _with_events(fn, device, clock):
    start, end = device.Event(enable_timing=True), device.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def own_call_figures(work: float, earlier: float) -> tuple[float, float]:
    """The two right figures on the judge's own device: synchronized (the launch and the work)
    and CUDA events (the work)."""
    figures = []
    for answer in (_synchronized, _with_events):
        device, call = _device(work, earlier)
        figures.append(answer(call, device, device.clock))
    return tuple(figures)


def own_rate(settings: dict, sizes: list[int], warmup: int) -> float:
    """The course's measurement of the same simulated loop, run by the judge."""
    return measure_rate(timing.images_per_second, settings, sizes, warmup)[0]


def own_step_seconds(batch: int, seed: int) -> float:
    """The judge's own timing of the same step: its fastest block of calls (under load a step
    takes longer, never less)."""
    step = training_step(batch, seed)
    step()
    timer = benchmark.Timer("step()", globals={"step": step})
    return min(timer.blocked_autorange(min_run_time=0.1).times)


def own_operators(batch: int, seed: int) -> set[str]:
    """The operators the judge's own profile of the same step records (their names)."""
    step = training_step(batch, seed)
    step()
    with tempfile.TemporaryDirectory(prefix="course-03.4-judge-") as tmp:
        path = Path(tmp) / "trace.json"
        profile_call(step, trace_path=path)
        return {e["name"] for e in trace_events(path.read_text()) if e.get("cat") == "cpu_op"}
