"""Lesson 08 checkers: pass on the reference, fail with a useful message on known-wrong answers,
'not attempted yet' on a stub and on a run that never happened; held-out cases catch answers
right only on the visible cases."""

import json
import time

import pytest

from course_utils import how_many, profiling, throughput
from course_utils.grading import run_check
from course_utils.grading.checks import lesson08


def _stub(*args):
    raise NotImplementedError


# ---- 08.1 ---------------------------------------------------------------------------------


def test_time_loader_passes_on_the_packages_version_with_what_it_saw():
    """The package's time_loader is the lesson's answer (the solution's is graded in the
    solutions lane)."""
    done = run_check("08.1", throughput.time_loader)
    assert done.passed, done.message
    assert done.message == (
        "exactly 4 batches (22 images) taken, at the rate the loader's log and the check's own "
        "timing of it show"
    )


def test_time_loader_that_assumes_full_batches_fails():
    def fixed_batch_size(loader, batches):
        start = time.perf_counter()
        for i, _ in enumerate(loader):
            if i + 1 == batches:
                break
        return 16 * batches / (time.perf_counter() - start)  # 64 images counted, 22 came

    wrong = run_check("08.1", fixed_batch_size)
    assert wrong.verdict == "failed"
    assert "22 images over the seconds the batches took to come" in wrong.message, wrong.message


def test_time_loader_that_takes_the_whole_epoch_or_starts_late_fails():
    def whole_epoch(loader, batches):
        return throughput.time_loader(loader, len(loader))

    assert run_check("08.1", whole_epoch).message.startswith(
        "time_loader(loader, 4) on a loader of batches [16, 2, 2, 2, 16, 16], 20 ms each: "
        "expected exactly 4 batches taken in one pass over the loader, got 6 batches in 1 pass"
    )

    def after_the_first_batch(loader, batches):  # the first batch's wait is not timed
        batches_left, images = iter(loader), 0
        images += len(next(batches_left)[1])
        start = time.perf_counter()
        for i, (_, targets) in enumerate(batches_left):
            images += len(targets)
            if i + 2 == batches:
                break
        return images / (time.perf_counter() - start)

    late = run_check("08.1", after_the_first_batch)
    assert late.verdict == "failed" and "as the loader's own log saw it" in late.message


def test_time_loader_without_a_run_is_not_attempted():
    assert run_check("08.1", _stub).verdict == "not attempted yet"
    typed = run_check("08.1", lambda loader, batches: 275.0)  # the visible ceiling, typed in
    assert typed.verdict == "not attempted yet"
    assert typed.message.startswith("run the loader first: your time_loader returned without")


def test_a_log_written_by_hand_fails():
    """Batches entered in the loader's log, none taken: the run was shorter than the batches."""

    def forged(loader, batches):
        now = time.perf_counter()
        loader.passes.append(now - 0.08)
        loader.handed.extend((size, now - 0.06 + 0.02 * i) for i, size in enumerate([16, 2, 2, 2]))
        return 22 / 0.08

    wrong = run_check("08.1", forged)
    assert wrong.verdict == "failed"
    assert (
        "expected a log within the" in wrong.message and "of at least the 0.08 s" in wrong.message
    )


def test_time_loader_that_times_more_than_the_loader_fails():
    def with_a_pause(loader, batches):
        images, start = 0, time.perf_counter()
        for i, (_, targets) in enumerate(loader):
            images += len(targets)
            if i + 1 == batches:
                break
        time.sleep(0.3)  # something else inside the timed span
        return images / (time.perf_counter() - start)

    wrong = run_check("08.1", with_a_pause)
    assert wrong.verdict == "failed" and "as the loader's own log saw it" in wrong.message


# ---- 08.2 ---------------------------------------------------------------------------------


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

    as_list = run_check("08.2", lambda *rates: list(_bottleneck(*rates)))
    assert "expected a pair (limit, bound), got ['loader', 1.25]" in as_list.message
    assert run_check("08.2", _stub).verdict == "not attempted yet"


# ---- 08.3 ---------------------------------------------------------------------------------


def _name_the_bottleneck(model, loader, optimizer, trace_path):
    profiling.profile_call(
        profiling.documentation_loop, model, loader, optimizer, steps=4, trace_path=trace_path
    )
    share = profiling.loading_share(profiling.read_trace(trace_path))
    return "loader" if share > 0.5 else "compute"


def test_name_the_bottleneck_reads_the_learners_own_trace():
    result = run_check("08.3", _name_the_bottleneck)
    assert result.passed, result.message

    def always_compute(model, loader, optimizer, trace_path):  # profiles, then ignores it
        _name_the_bottleneck(model, loader, optimizer, trace_path)
        return "compute"

    wrong = run_check("08.3", always_compute).message
    assert wrong.startswith("on the check's loader-bound job: expected 'loader' (your trace: ")
    assert wrong.endswith("got 'compute'")


def test_name_the_bottleneck_without_a_trace_or_a_run():
    def guesses(model, loader, optimizer, trace_path):  # no profile, no training at all
        return "compute"

    assert run_check("08.3", guesses).message.startswith("run the jobs first: ")
    assert run_check("08.3", guesses).verdict == "not attempted yet"

    def trains_without_profiling(model, loader, optimizer, trace_path):
        profiling.documentation_loop(model, loader, optimizer, steps=2)
        return "compute"

    untraced = run_check("08.3", trains_without_profiling).message
    assert untraced.startswith("on the check's compute-bound job: expected a torch.profiler trace")

    def batch_outside_the_profile(model, loader, optimizer, trace_path):
        batches = [next(iter(loader))]  # fetched before profiling: loading never shows
        profiling.profile_call(
            profiling.documentation_loop, model, batches, optimizer, trace_path=trace_path
        )
        return "compute"

    outside = run_check("08.3", batch_outside_the_profile).message
    assert "the loader was not iterated inside the profile" in outside
    assert run_check("08.3", _stub).verdict == "not attempted yet"


def _forged_trace(path, fetch_ms: float, fetches: int = 4):
    """A trace typed by hand: fetches of `fetch_ms`, and a backward pass, spread over 2 s."""
    events = [
        {
            "ph": "X",
            "name": f"{profiling.LOADER_EVENT}x.__next__",
            "cat": "cpu_op",
            "ts": i * 5e5,
            "dur": fetch_ms * 1e3,
        }
        for i in range(fetches)
    ]
    events.append(
        {"ph": "X", "name": "aten::convolution_backward", "cat": "cpu_op", "ts": 1.9e6, "dur": 1e5}
    )
    path.write_text(json.dumps({"traceEvents": events}))


def test_a_trace_typed_by_hand_fails():
    def forged(model, loader, optimizer, trace_path):
        profiling.documentation_loop(model, loader, optimizer, steps=4)  # a run, unprofiled
        loader_bound = loader.batch_size == 16
        _forged_trace(trace_path, fetch_ms=400 if loader_bound else 10, fetches=2)
        return "loader" if loader_bound else "compute"

    wrong = run_check("08.3", forged)
    assert wrong.verdict == "failed"
    assert "a profile within the" in wrong.message and "a trace of 2.00 s" in wrong.message

    def too_many_fetches(model, loader, optimizer, trace_path):
        profiling.documentation_loop(model, loader, optimizer, steps=1)
        _forged_trace(trace_path, fetch_ms=1, fetches=9)
        return "compute"

    more = run_check("08.3", too_many_fetches).message
    assert "expected at most one fetch in the trace per batch the loader handed out (1)," in more


# ---- 08.4 ---------------------------------------------------------------------------------


def gpus_to_ask_for(rates, work, deadline_hours, min_efficiency=0.8):
    good = [n for n in sorted(rates) if rates[n] / (n * rates[1]) >= min_efficiency]
    hours = {n: work / rates[n] / 3600 for n in rates}
    if deadline_hours is None:
        return max(good), True
    in_time = [n for n in good if hours[n] <= deadline_hours]
    return (min(in_time), True) if in_time else (max(good), False)


def test_gpus_to_ask_for_is_how_many_choose():
    done = run_check("08.4", gpus_to_ask_for)
    assert done.passed, done.message

    def choose(rates, work, deadline_hours, min_efficiency=0.8):
        c = how_many.choose(rates, work, deadline_hours, min_efficiency)
        return c.gpus, c.meets_deadline

    assert run_check("08.4", choose).passed


def test_gpus_to_ask_for_with_either_rule_alone_fails():
    def fewest_gpu_hours(rates, work, deadline_hours, min_efficiency=0.8):  # no efficiency floor
        fitting = [n for n in sorted(rates) if work / rates[n] / 3600 <= (deadline_hours or 1e9)]
        if not fitting:
            return max(rates), False
        return min(fitting, key=lambda n: n / rates[n]), True

    old = run_check("08.4", fewest_gpu_hours)
    assert old.verdict == "failed"
    assert "deadline_hours=2.0, 0.8): expected (4, False): no count that keeps 80%" in old.message

    def most_efficient_ranks(rates, work, deadline_hours, min_efficiency=0.8):  # no deadline
        return gpus_to_ask_for(rates, work, None, min_efficiency)

    fast = run_check("08.4", most_efficient_ranks)
    assert "deadline_hours=12.0, 0.8): expected (1, True): the fewest GPUs" in fast.message
    assert fast.message.endswith("got (4, True)")
    assert run_check("08.4", _stub).verdict == "not attempted yet"


# ---- held-out cases ------------------------------------------------------------------------


def test_08_1_held_out_cases_fail_image_counts_of_the_visible_loader(held_out_catches):
    def visible_counts(loader, batches):  # times well, but counts the visible batches
        start = time.perf_counter()
        for i, _ in enumerate(loader):
            if i + 1 == batches:
                break
        return sum(lesson08.LOADER_SIZES[:batches]) / (time.perf_counter() - start)

    failure = held_out_catches("08.1", throughput.time_loader, visible_counts)
    assert "as the loader's own log saw it" in failure or "exactly" in failure, failure


def test_08_2_held_out_cases_fail_a_table_of_the_visible_answers(held_out_catches):
    table = {case: _bottleneck(*case) for case in lesson08.BOTTLENECK_CASES}

    def from_the_table(*rates):
        return table.get(tuple(rates), ("loader", 1.0))

    failure = held_out_catches("08.2", _bottleneck, from_the_table)
    assert failure.startswith("bottleneck(loader_rate="), failure


def test_08_4_held_out_cases_fail_the_visible_answers_typed_in(held_out_catches):
    answers = {
        (d, f): gpus_to_ask_for(lesson08.GPU_RATES, lesson08.WORK, d, f)
        for d, f in lesson08.GPU_CASES
    }

    def typed_in(rates, work, deadline_hours, min_efficiency=0.8):
        return answers.get((deadline_hours, min_efficiency), (1, True))

    failure = held_out_catches("08.4", gpus_to_ask_for, typed_in)
    assert failure.startswith("gpus_to_ask_for({1: "), failure


@pytest.mark.parametrize("exercise_id", ["08.1", "08.2", "08.3", "08.4"])
def test_stubs_are_not_attempted(exercise_id):
    assert run_check(exercise_id, _stub).verdict == "not attempted yet"


def test_lazy_answers_are_flagged_and_the_reference_answers_are_not():
    from course_utils.grading.grader.plan import review_flags

    lazy = {
        "08.1": "def time_loader(loader, n):\n    return throughput.time_loader(loader, n)",
        "08.2": "def bottleneck(*rates):\n    return speed.bottleneck(*rates)",
        "08.4": "def gpus_to_ask_for(rates, work, deadline_hours, min_efficiency=0.8):\n"
        "    c = how_many.choose(rates, work, deadline_hours, min_efficiency)\n"
        "    return c.gpus, c.meets_deadline",
    }
    flags = review_flags(lazy)
    assert [f.split(":")[0] for f in flags] == ["08.1", "08.2", "08.4"], flags
    assert all("calls the course's own answer" in f for f in flags)
    profiled = (
        "def name_the_bottleneck(m, l, o, trace_path):\n    json.loads(open(trace_path).read())"
    )
    assert review_flags({"08.3": profiled}) == []  # reading its own trace is the exercise
