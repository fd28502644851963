"""Lesson 02 checkers: pass on the reference, fail with a useful message on known-wrong answers.

02.2 holds the learner's rates to the judge's own timing of the same step: its rules are judged
here on canned reports and on answers that fail whatever the timings, and its passing runs are in
tests/integration/test_checks_lessons01_02_timed.py (a busy machine can set the two timings far
apart). 02.3's loaders start worker processes, so its passing runs are in
tests/integration/test_checks_lesson02_runs.py; here it is judged on answers that start none, and
on canned reports of the data set's log.
"""

import statistics
import time
from functools import partial

import pytest
import torch
from lessons01_02_answers import thread_rates

from course_utils import cpu_sweep, data, hpc
from course_utils.grading import CheckFailed, NotAttempted, run_check
from course_utils.grading.checks import lesson02
from course_utils.grading.probes import lesson02 as lesson02_harness
from course_utils.timing import time_fn

NOT_ATTEMPTED = "not attempted yet"


def _stub(*args):
    raise NotImplementedError("Exercise 02.x")


# ---- 02.1 ---------------------------------------------------------------------------------


def choose_device(disable):
    return torch.device("cuda" if not disable and torch.cuda.is_available() else "cpu")


def test_choose_device():
    assert run_check("02.1", choose_device).passed
    by_count = run_check(
        "02.1", lambda d: torch.device("cpu" if d or not torch.cuda.device_count() else "cuda")
    )
    assert by_count.passed, by_count.message  # the node's answers are consistent
    assert run_check("02.1", _stub).verdict == NOT_ATTEMPTED


def test_choose_device_that_ignores_the_flag_or_the_node_fails():
    ignores_flag = run_check(
        "02.1", lambda d: torch.device("cuda" if torch.cuda.is_available() else "cpu")
    )
    assert ignores_flag.message == (
        "choose_device(True) on a GPU node: expected cpu when --disable-cuda is given, got cuda"
    )
    assumes_gpu = run_check("02.1", lambda d: torch.device("cpu" if d else "cuda"))
    assert assumes_gpu.message == (
        "choose_device(False) on a CPU node: expected cpu when no GPU is available, got cuda"
    )


def test_choose_device_that_returns_a_name_or_raises_fails():
    strings = run_check("02.1", lambda d: "cpu")
    assert strings.message == "choose_device(False) on a GPU node: expected a torch.device, got str"
    raises = run_check("02.1", lambda d: torch.device("CUDA"))
    assert raises.verdict == "failed" and "an error: RuntimeError" in raises.message


# ---- 02.2 ---------------------------------------------------------------------------------


def test_thread_rates_stub_is_not_attempted():
    assert run_check("02.2", _stub).verdict == NOT_ATTEMPTED


def test_thread_rates_without_running_the_step_are_not_attempted():
    typed = run_check("02.2", lambda step, b: {n: 1e4 for n in cpu_sweep.counts(2)})
    assert typed.verdict == NOT_ATTEMPTED
    assert typed.message.startswith("run the step first: your thread_rates returned without")


def test_thread_rates_at_the_end_points_of_32_cpus_fail():
    """Rates at the end points alone (`{1: x, 32: y}`) once passed on a 32-CPU node: the counts
    between are part of the answer. An allocation of 32 injected."""
    ends = run_check("02.2", partial(thread_rates, counts=[1, 32]), cpus=32)
    assert ends.verdict == "failed"
    assert ends.message == (
        "thread_rates on an allocation of 32 CPU(s): expected thread counts "
        "[1, 2, 4, 8, 16, 32] (cpu_sweep.counts(32)), got [1, 32], without [2, 4, 8, 16]"
    )
    assert torch.get_num_threads() == hpc.allocated_cpus()  # the check put them back


def test_thread_rates_beyond_the_allocation_or_left_at_one_thread_fail():
    cpus = hpc.allocated_cpus()
    beyond = run_check("02.2", partial(thread_rates, counts=[*cpu_sweep.counts(cpus), cpus + 1]))
    assert f"thread counts from 1 to the {cpus} allocated CPUs, got [{cpus + 1}]" in beyond.message
    one = run_check("02.2", partial(thread_rates, counts=[2, 1], restore=False), cpus=2)
    assert one.message == (
        "thread_rates on an allocation of 2 CPU(s): expected torch's threads back at 2 "
        "afterwards (hpc.configure_threads()), got 1"
    )


def test_thread_rates_that_time_something_else_fail():
    """Measured in the kernel on another workload, the given step called only to leave a log."""

    def other_work(step, batch_size):
        rates = {}
        for n in cpu_sweep.counts(hpc.allocated_cpus()):
            hpc.configure_threads(n)
            for _ in range(3):
                step()
            rates[n] = batch_size / time_fn(lambda: None, min_run_time=0.02).median
        hpc.configure_threads()
        return rates

    wrong = run_check("02.2", other_work)
    assert wrong.verdict == "failed"
    assert "a figure the step's own clock does not support" in wrong.message


def test_thread_rates_from_a_forged_log_fail():
    def forged(step, batch_size, seconds=1e-5):
        rates = {}
        for n in cpu_sweep.counts(hpc.allocated_cpus()):
            step.calls.extend([(n, seconds)] * 5)  # a log typed in, as fast as one likes
            rates[n] = batch_size / seconds
        hpc.configure_threads()  # threads as the allocation has them, as the check asks
        return rates

    fast = run_check("02.2", forged, cpus=2)
    assert fast.verdict == "failed"
    assert "images/s per thread, as the check timed the same step" in fast.message
    long = run_check("02.2", partial(forged, seconds=60.0), cpus=2)
    assert "expected a log of calls within the" in long.message
    assert long.message.endswith("got 600.00 s of calls")


def report(rates, calls, allocated=2, restored=2):
    return {"rates": rates, "calls": calls, "allocated": allocated, "restored": restored}


def test_thread_rates_on_an_allocation_of_six():
    calls = [(n, 0.01) for n in (1, 2, 4, 6) for _ in range(3)]
    rates = {n: 256 / 0.01 for n in (1, 2, 4, 6)}
    ok = lesson02.verify_thread_rates(report(rates, calls, 6, 6), 256, 0.01, 1.0)
    assert ok.startswith("every count of cpu_sweep.counts")
    with pytest.raises(
        CheckFailed, match=r"\[1, 2, 4, 6\] \(cpu_sweep.counts\(6\)\), got \[1, 6\]"
    ):
        lesson02.verify_thread_rates(report({1: 25600.0, 6: 25600.0}, calls, 6, 6), 256, 0.01, 1)
    with pytest.raises(CheckFailed, match="a figure the step's own clock does not support"):
        lesson02.verify_thread_rates(report({**rates, 2: 1e9}, calls, 6, 6), 256, 0.01, 1.0)
    with pytest.raises(CheckFailed, match="thread counts as ints"):
        lesson02.verify_thread_rates(report({1.0: 1.0}, calls, 6, 6), 256, 0.01, 1.0)
    with pytest.raises(NotAttempted, match="run the step first"):
        lesson02.verify_thread_rates(report(rates, [], 6, 6), 256, 0.01, 1.0)


def test_thread_rates_measured_under_load_pass_where_calls_vary_widely():
    # Under load (seen in a Slurm grading array on 2 cores) most calls took 10 ms and a few were
    # descheduled for 0.5 s: a block mean of 100 ms is honest, though 10x the median call.
    calls = [(n, s) for n in (1, 2) for s in (0.01,) * 8 + (0.5,) * 2]
    from_block_means = {1: 256 / 0.1, 2: 256 / 0.1}
    passed = lesson02.verify_thread_rates(report(from_block_means, calls), 256, 0.01, 3.0)
    assert passed.startswith("every")
    for unsupported in (256 / 0.5 / 2, 256 / 0.01 * 2):  # slower or faster than any call
        with pytest.raises(CheckFailed, match="a figure the step's own clock does not support"):
            lesson02.verify_thread_rates(
                report({1: unsupported, 2: 256 / 0.1}, calls), 256, 0.01, 3.0
            )


# ---- 02.3 ---------------------------------------------------------------------------------


def main_process_only(dataset, batch_size, counts):
    """A loader without workers for every count named: no worker process starts."""
    rates = {}
    for count in counts:
        loader = data.make_loader(dataset, batch_size=batch_size, num_workers=0)
        start = time.perf_counter()
        images = sum(len(x) for x, _ in loader)
        rates[count] = images / (time.perf_counter() - start)
    return rates


def test_loader_rates_stub_or_without_reading_is_not_attempted():
    assert run_check("02.3", _stub).verdict == NOT_ATTEMPTED
    typed = run_check("02.3", lambda dataset, b: {0: 5e4, 1: 2e4, 2: 2e4})
    assert typed.verdict == NOT_ATTEMPTED
    assert typed.message.startswith("run the loaders first: your loader_rates returned")


def test_loader_rates_at_the_end_points_of_32_cpus_fail():
    """Rates at the end points alone (`{0: x, 32: y}`) once passed on a 32-CPU node: the counts
    between are part of the answer. An allocation of 32 injected."""
    ends = run_check("02.3", partial(main_process_only, counts=[0, 32]), cpus=32)
    assert ends.message == (
        "loader_rates on an allocation of 32 CPU(s): expected worker counts "
        "[0, 1, 2, 4, 8, 16, 32] (cpu_sweep.counts(32, start=0)), got [0, 32], "
        "without [1, 2, 4, 8, 16]"
    )


def test_loader_rates_that_name_workers_without_using_them_fail():
    named = run_check("02.3", partial(main_process_only, counts=[0, 1, 2]), cpus=2)
    assert named.message == (
        "loader_rates on an allocation of 2 CPU(s): expected num_workers=1: the data set read "
        "in full by a loader with 1 worker(s) (1,024 reads), got 0: make each loader with "
        "num_workers=count and pass over all of it"
    )


IMAGES = lesson02_harness.loader_images(2)  # 1,024
GOOD_READS = [[IMAGES, 0, 0, 0], [0, IMAGES, 0, 0], [0, IMAGES // 2, IMAGES // 2, 0], [0] * 4]


def loader_report(rates, reads=GOOD_READS, spans=(0.02, 0.2, 0.15, 0.0), allocated=2):
    return {"rates": rates, "reads": reads, "spans": list(spans), "allocated": allocated}


RATES = {0: 40_000.0, 1: 5_000.0, 2: 6_000.0}  # passes of 26, 205 and 171 ms


def test_loader_rates_from_a_real_log_pass():
    got = lesson02.verify_loader_rates(loader_report(RATES), 64, IMAGES / 40_000, 1.0)
    assert got.startswith("every count of cpu_sweep.counts measured")


def test_loader_rates_beyond_the_allocation_or_faster_than_the_run_fail():
    beyond = loader_report({**RATES, 3: 6_000.0})
    with pytest.raises(
        CheckFailed, match=r"worker counts from 0 to the 2 allocated CPUs, got \[3\]"
    ):
        lesson02.verify_loader_rates(beyond, 64, IMAGES / 40_000, 1.0)
    with pytest.raises(CheckFailed, match="figures faster than the run that made them"):
        lesson02.verify_loader_rates(loader_report(RATES), 64, IMAGES / 40_000, 0.3)
    unread = [row[:] for row in GOOD_READS]
    unread[3][1] = IMAGES  # a loader with 3 workers read it: more than the allocation
    with pytest.raises(CheckFailed, match="no loader with more workers than CPUs"):
        lesson02.verify_loader_rates(loader_report(RATES, unread), 64, IMAGES / 40_000, 1.0)


def test_loader_rates_the_logs_clock_or_the_judges_own_pass_do_not_support_fail():
    quick = loader_report({**RATES, 1: 100_000.0})  # 10 ms for a pass whose reads took 200 ms
    with pytest.raises(CheckFailed, match="a figure the data set's own clock does not support"):
        lesson02.verify_loader_rates(quick, 64, IMAGES / 40_000, 1.0)
    with pytest.raises(CheckFailed, match="num_workers=0: about 2,000 images/s, as the check"):
        lesson02.verify_loader_rates(loader_report(RATES), 64, IMAGES / 2_000, 1.0)


def test_loader_rates_from_one_worker_of_two_fail():
    one = [row[:] for row in GOOD_READS]
    one[2] = [0, IMAGES, 0, 0]
    with pytest.raises(CheckFailed, match="num_workers=2: reads from all 2 worker processes"):
        lesson02.verify_loader_rates(loader_report(RATES, one), 64, IMAGES / 40_000, 1.0)


# ---- 02.4 ---------------------------------------------------------------------------------


def gpu_or_cpu(images, cpu, gpu, extra_wait_s):
    cpu_s, gpu_s = images / cpu["images_per_s"], images / gpu["images_per_s"]
    busy = statistics.fmean(gpu["util_samples"]) >= 50
    return {
        "ask_for": "gpu" if busy and gpu_s + extra_wait_s < cpu_s else "cpu",
        "core_hours": cpu["cores"] * cpu_s / 3600,
        "gpu_hours": gpu_s / 3600,
    }


def test_gpu_or_cpu():
    assert run_check("02.4", gpu_or_cpu).passed
    assert run_check("02.4", _stub).verdict == NOT_ATTEMPTED


def test_gpu_or_cpu_on_speed_alone_fails_on_the_documentations_case():
    def fastest(images, cpu, gpu, wait):
        faster = images / gpu["images_per_s"] + wait < images / cpu["images_per_s"]
        return {**gpu_or_cpu(images, cpu, gpu, wait), "ask_for": "gpu" if faster else "cpu"}

    assert run_check("02.4", fastest).message == (
        "the documentation's small CNN: fast on a GPU, but the GPU is 5% busy: "
        "expected 'cpu', got 'gpu'"
    )


def test_gpu_or_cpu_with_the_busiest_sample_or_without_the_wait_fails():
    def busiest(images, cpu, gpu, wait):
        return gpu_or_cpu(images, cpu, {**gpu, "util_samples": [max(gpu["util_samples"])]}, wait)

    assert run_check("02.4", busiest).message == (
        "a GPU busy in one sample of five (mean 20%): expected 'cpu', got 'gpu'"
    )
    no_wait = run_check("02.4", lambda i, c, g, w: gpu_or_cpu(i, c, g, 0))
    assert no_wait.message.startswith("a 4-minute CPU job against a 1-hour wait for a GPU")


def test_gpu_or_cpu_costs_in_hours_per_core_as_plain_numbers():
    def per_job(images, cpu, gpu, wait):  # forgets that a CPU job holds all its cores
        return {
            **gpu_or_cpu(images, cpu, gpu, wait),
            "core_hours": images / cpu["images_per_s"] / 3600,
        }

    assert run_check("02.4", per_job).message == (
        "the documentation's small CNN: fast on a GPU, but the GPU is 5% busy: "
        "expected core_hours 5.556, got 0.6944444444444444"
    )
    seconds = run_check("02.4", lambda *a: {**gpu_or_cpu(*a), "gpu_hours": 125.0})
    assert seconds.message.endswith("expected gpu_hours 0.03472, got 125.0")
    tensor = run_check("02.4", lambda *a: {**gpu_or_cpu(*a), "gpu_hours": torch.tensor(0.0347)})
    assert tensor.message.endswith("expected gpu_hours 0.03472, got tensor(0.0347)")


def test_02_4_held_out_cases_fail_the_four_visible_answers_typed_in(held_out_catches):
    visible = {
        (images, wait): gpu_or_cpu(images, cpu, gpu, wait)
        for images, cpu, gpu, wait, _ in lesson02.DECISIONS
    }

    def typed_in(images, cpu, gpu, extra_wait_s):
        return visible.get(
            (images, extra_wait_s), {"ask_for": "cpu", "core_hours": 1.0, "gpu_hours": 1.0}
        )

    assert "gpu_or_cpu(" in held_out_catches("02.4", gpu_or_cpu, typed_in)


# ---- 02.5 ---------------------------------------------------------------------------------


def gpu_job_header(hours, cores, mem_gb):
    return (
        "#!/bin/bash\n#SBATCH --ntasks=1\n#SBATCH --gres=gpu:1\n"
        f"#SBATCH --cpus-per-task={cores}\n#SBATCH --mem={mem_gb}G\n"
        f"#SBATCH --time={round(hours * 60)}\n"
    )


def test_bundle_header():
    assert run_check("02.5", gpu_job_header).passed
    assert run_check("02.5", _stub).verdict == NOT_ATTEMPTED


def test_bundle_header_names_the_wrong_request():
    mega = run_check("02.5", lambda h, c, m: gpu_job_header(h, c, m).replace("G\n", "\n"))
    assert mega.message == (
        "gpu_job_header(3, 12, 124): expected the bundle's 124G = 126976 MB (--mem), got 124 MB"
    )
    hours = run_check(
        "02.5", lambda h, c, m: gpu_job_header(h, c, m).replace("--time=", "--time=0")
    )
    assert hours.verdict == "passed"  # 0180 is still 180 minutes
    as_hours = run_check(
        "02.5",
        lambda h, c, m: gpu_job_header(h, c, m).replace(f"--time={round(h * 60)}", f"--time={h}"),
    )
    assert as_hours.message == "gpu_job_header(3, 12, 124): expected 180 minutes, got 3 minutes"
    two = run_check("02.5", lambda h, c, m: gpu_job_header(h, c, m).replace("gpu:1", "gpu:2"))
    assert two.message == "gpu_job_header(3, 12, 124): expected one GPU, got 2 GPU(s)"
    all_cores = run_check("02.5", lambda h, c, m: gpu_job_header(h, 64, m))
    assert all_cores.message == (
        "gpu_job_header(3, 12, 124): expected the bundle's 12 CPUs (--cpus-per-task), got 64"
    )
    lines = run_check("02.5", lambda h, c, m: gpu_job_header(h, c, m).splitlines())
    assert lines.message == "gpu_job_header(3, 12, 124): expected the header as a string, got list"


def test_02_5_held_out_cases_fail_headers_kept_for_the_visible_bundles(held_out_catches):
    kept = {bundle: gpu_job_header(*bundle) for bundle in lesson02.BUNDLES}

    def typed_in(hours, cores, mem_gb):
        return kept.get((hours, cores, mem_gb), kept[lesson02.BUNDLES[0]])

    assert held_out_catches("02.5", gpu_job_header, typed_in).startswith("gpu_job_header(")
