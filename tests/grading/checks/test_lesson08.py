"""Lesson 08 checkers: pass on the reference, fail with a useful message on known-wrong answers."""

import time

from course_utils import profiling, throughput
from course_utils.grading import run_check


def _stub(*args):
    raise NotImplementedError


def test_time_loader():
    assert run_check("08.1", throughput.time_loader).passed

    def fixed_batch_size(loader, batches):  # assumes every batch is full
        start = time.perf_counter()
        for i, _ in enumerate(loader):
            if i + 1 == batches:
                break
        return 16 * batches / (time.perf_counter() - start)  # 64 images counted, 22 came

    wrong = run_check("08.1", fixed_batch_size)
    assert wrong.verdict == "failed" and "about 275 images/s" in wrong.message

    def whole_epoch(loader, batches):
        return throughput.time_loader(loader, len(loader))

    assert run_check("08.1", whole_epoch).message == (
        "expected exactly 4 batches taken from the loader, got 6"
    )
    assert run_check("08.1", _stub).verdict == "not attempted yet"


def _bottleneck(loader_rate, compute_rate, measured_rate):
    limit = "loader" if loader_rate < compute_rate else "compute"
    return limit, min(loader_rate, compute_rate) / measured_rate


def test_bottleneck():
    assert run_check("08.2", _bottleneck).passed

    def faster_part(loader_rate, compute_rate, measured_rate):  # names the faster part
        limit = "loader" if loader_rate > compute_rate else "compute"
        return limit, min(loader_rate, compute_rate) / measured_rate

    wrong = run_check("08.2", faster_part)
    assert "expected 'loader', got 'compute'" in wrong.message

    def sum_bound(loader_rate, compute_rate, measured_rate):  # no overlap assumed
        return _bottleneck(loader_rate, compute_rate, measured_rate)[0], 1.0

    bound = run_check("08.2", sum_bound)
    assert bound.verdict == "failed" and "expected at most 1.25x" in bound.message
    assert run_check("08.2", _stub).verdict == "not attempted yet"


def _name_the_bottleneck(model, loader, optimizer, trace_path):
    profiling.profile_call(
        profiling.documentation_loop, model, loader, optimizer, steps=4, trace_path=trace_path
    )
    share = profiling.loading_share(profiling.read_trace(trace_path))
    return "loader" if share > 0.5 else "compute"


def test_name_the_bottleneck_reads_the_learners_own_trace():
    result = run_check("08.3", _name_the_bottleneck)
    assert result.passed, result.message

    def guesses(model, loader, optimizer, trace_path):  # no profile at all
        return "compute"

    assert run_check("08.3", guesses).message.startswith(
        "expected a torch.profiler trace at compute-bound.json"
    )

    def always_compute(model, loader, optimizer, trace_path):  # profiles, then ignores it
        _name_the_bottleneck(model, loader, optimizer, trace_path)
        return "compute"

    wrong = run_check("08.3", always_compute).message
    assert wrong.startswith("on the check's loader-bound job: expected 'loader' (your trace: ")
    assert wrong.endswith("got 'compute'")

    def batch_outside_the_profile(model, loader, optimizer, trace_path):
        batches = [next(iter(loader))]  # fetched before profiling: loading never shows
        profiling.profile_call(
            profiling.documentation_loop, model, batches, optimizer, trace_path=trace_path
        )
        return "compute"

    outside = run_check("08.3", batch_outside_the_profile).message
    assert "the loader was not iterated inside the profile" in outside
    assert run_check("08.3", _stub).verdict == "not attempted yet"


def _gpus_to_ask_for(rates, images, hours_limit):
    fitting = [n for n in sorted(rates) if images / rates[n] / 3600 <= hours_limit]
    if not fitting:
        return None
    return min(fitting, key=lambda n: n * images / rates[n])


def test_gpus_to_ask_for():
    assert run_check("08.4", _gpus_to_ask_for).passed

    def most_gpus(rates, images, hours_limit):  # the fastest, whatever it costs
        return max(rates)

    wrong = run_check("08.4", most_gpus)
    assert "expected 1 GPUs (10.0 GPU-hours, 10.0 h)" in wrong.message
    assert "got 8 (16.7 GPU-hours)" in wrong.message

    def ignores_the_limit(rates, images, hours_limit):
        return min(rates, key=lambda n: n * images / rates[n])

    late = run_check("08.4", ignores_the_limit)
    assert "hours_limit=6" in late.message and "expected 2 GPUs" in late.message
    assert run_check("08.4", _stub).verdict == "not attempted yet"


# ---- held-out cases ------------------------------------------------------------------------


def test_08_4_held_out_cases_fail_the_four_visible_answers_typed_in(held_out_catches):
    def typed_in(rates, images, hours_limit):
        return {12.0: 1, 6.0: 2, 3.0: 4, 2.0: None}.get(hours_limit, 1)

    failure = held_out_catches("08.4", _gpus_to_ask_for, typed_in)
    assert failure.startswith("gpus_to_ask_for({1: "), failure
