"""Reference answers of lessons 01 and 02's measurement exercises (01.1, 01.2, 02.2), shared by
tests/grading/checks/test_lesson01.py and test_lesson02.py (answers judged on what they return
and on canned records) and tests/integration/test_checks_lessons01_02_timed.py (their timings
held to the judge's own)."""

from functools import partial

import torch
from torch.utils import benchmark

from course_utils import cpu_sweep, hpc
from course_utils.timing import time_fn


def flatten(x):
    return x.flatten(1)


def view_and_copy_costs(
    images,
    *,
    copy=lambda t: t.clone(),
    time_copy="v.clone()",
    time_view="images.flatten(1)",
    min_run_time=0.05,
):
    view = flatten(images)
    names = {"images": images, "v": view}
    timer = partial(benchmark.Timer, globals=names)
    return {
        "view": view,
        "copy": copy(view),
        "view_time": timer(time_view).blocked_autorange(min_run_time=min_run_time),
        "copy_time": timer(time_copy).blocked_autorange(min_run_time=min_run_time),
    }


def standardize(x):
    return (x - x.mean(0)) / x.std(0, unbiased=False)


def loop(x):
    out = torch.empty_like(x)
    for j in range(x.shape[1]):
        out[:, j] = (x[:, j] - x[:, j].mean()) / x[:, j].std(unbiased=False)
    return out


def broadcast_vs_loop(x, *, fn=standardize, looped=loop, min_run_time=0.05):
    names = {"x": x, "fn": fn, "loop": looped}
    timer = partial(benchmark.Timer, globals=names)
    return {
        "result": fn(x),
        "broadcast_time": timer("fn(x)").blocked_autorange(min_run_time=min_run_time),
        "loop_time": timer("loop(x)").blocked_autorange(min_run_time=min_run_time),
    }


def thread_rates(step, batch_size, *, counts=None, restore=True, min_run_time=0.02):
    rates = {}
    for n in counts or cpu_sweep.counts(hpc.allocated_cpus()):
        hpc.configure_threads(n)
        rates[n] = batch_size / time_fn(step, min_run_time=min_run_time).median
    if restore:
        hpc.configure_threads()
    return rates
