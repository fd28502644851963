"""Checkers of lesson 02, from CPU to GPU and CPU parallelism.

02.1: a probe calls `choose_device` in the learner's process as a GPU node and as a CPU node
would (torch.cuda's and torch.accelerator's answers patched there); the judge reads the three
devices. 02.2 and 02.3 are the learner's own measurements: a probe hands their function a step
(`CountedStep`) or a data set (`CountedReads`) that logs what really ran (each call's thread
count and seconds; each read's loader, worker and time). The judge requires every count of
`cpu_sweep.counts` for the allocation and figures that log supports, within SAME_SIZE of its own
wait for the run and its own timing of the same work (the step on one thread, a pass without
workers); 02.2's job, in Slurm's record, is `answer_job_records`'s. 02.4, 02.5: plain data.
"""

import functools
import math
import statistics
import time

import torch
from torch.utils import benchmark
from torch.utils.data import DataLoader

from course_utils import cpu_sweep, sbatch
from course_utils.grading import (
    CheckFailed,
    NotAttempted,
    call_answer,
    exercise,
    expect,
    held_out,
    run_probe,
)
from course_utils.grading.checks import answer_job_records, slurm_record
from course_utils.grading.probes import lesson02 as probes

SAME_SIZE = 10.0  # the learner's figure within this factor of the judge's own measurement
SLACK = 1.5  # a rate may sit this far outside what the log's own clock saw (a block mean)


def _number(x) -> bool:
    return type(x) in (int, float) and math.isfinite(x) and x > 0


# ---- 02.1 ---------------------------------------------------------------------------------

# (GPUs on the node, disable_cuda, the device type wanted, the rule, the case)
NODES = [
    (1, False, "cuda", "cuda when a GPU is available", "choose_device(False) on a GPU node"),
    (1, True, "cpu", "cpu when --disable-cuda is given", "choose_device(True) on a GPU node"),
    (0, False, "cpu", "cpu when no GPU is available", "choose_device(False) on a CPU node"),
]


@exercise("02.1", "the --disable-cuda pattern", reference=(r"pick_device\(",))
def check_choose_device(choose_device):
    nodes = [(gpus, disable) for gpus, disable, *_ in NODES]
    found = run_probe(probes.run_choose_device, choose_device, nodes=nodes)
    for (_, _, want, rule, what), got in zip(NODES, found, strict=True):
        expect(got["raised"] is None, rule, f"an error: {got['raised']}", what)
        device = got["device"]
        expect(type(device) is torch.device, "a torch.device", got["kind"], what)
        expect(device.type == want, rule, str(device), what)
    return "GPU when there is one, CPU when asked or when there is none"


# ---- 02.2 ---------------------------------------------------------------------------------


def own_step_seconds() -> float:
    """The judge's median of the same step on one intra-op thread."""
    timer = benchmark.Timer("work()", globals={"work": probes.CountedStep().work}, num_threads=1)
    return timer.blocked_autorange(min_run_time=0.1).median


def own_pass_seconds(images: int, batch_size: int) -> float:
    """The judge's median of three passes over the same data set, without workers."""
    order = torch.Generator().manual_seed(0)  # not the process's global generator
    loader = DataLoader(
        probes.CountedReads(images, 1), batch_size=batch_size, shuffle=True, generator=order
    )
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        sum(len(x) for x, _ in loader)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def _counts(rates, allocated: int, start: int, noun: str, what: str) -> list[int]:
    """The learner's counts, sorted, once they are the sweep's counts within the allocation."""
    expect(
        type(rates) is dict and rates, f"a dict {{{noun}: images per second}}", repr(rates), what
    )
    expect(all(type(n) is int for n in rates), f"{noun} as ints", sorted(map(repr, rates)), what)
    outside = sorted(n for n in rates if not start <= n <= allocated)
    expect(not outside, f"{noun} from {start} to the {allocated} allocated CPUs", outside, what)
    want = cpu_sweep.counts(allocated, start)
    missing = [n for n in want if n not in rates]
    expect(
        not missing,
        f"{noun} {want} (cpu_sweep.counts({allocated}{', start=0' if start == 0 else ''}))",
        f"{sorted(rates)}, without {missing}",
        what,
    )
    return sorted(rates)


def verify_thread_rates(report: dict, batch_size: int, own_seconds: float, wall: float) -> str:
    """02.2 on the probe's report, the judge's own step time and the run's wall time."""
    allocated, calls = report["allocated"], report["calls"]
    if not calls:
        raise NotAttempted(
            "run the step first: your thread_rates returned without calling the step it was "
            "given (time step with time_fn at each thread count)"
        )
    expect(type(allocated) is int and allocated >= 1, "an allocation of CPUs", allocated)
    what = f"thread_rates on an allocation of {allocated} CPU(s)"
    rates = report["rates"]
    counts = _counts(rates, allocated, 1, "thread counts", what)
    restored = report["restored"]
    back = f"torch's threads back at {allocated} afterwards (hpc.configure_threads())"
    expect(restored == allocated, back, restored, what)
    logged = all(type(n) is int and _number(s) for n, s in calls)
    expect(logged, "the step's log of (threads, seconds) as it wrote it", "another log", what)
    seconds = sum(s for _, s in calls)
    expect(
        seconds <= wall * 1.05 + 0.05,
        f"a log of calls within the {wall:.2f} s the run took",
        f"{seconds:.2f} s of calls",
        what,
    )
    own = batch_size / own_seconds
    for n in counts:
        times = [s for threads, s in calls if threads == n]
        how = f"{n} thread(s)"
        expect(
            len(times) >= 3,
            f"the step run at least 3 times with {how} set",
            f"{len(times)} time(s): set the threads before timing",
            what,
        )
        rate = rates[n]
        expect(_number(rate), f"{how}: images per second, a number", repr(rate), what)
        # Supported: between the slowest and the fastest call the step's own clock saw, with a
        # margin. Under load one call can take many times another, so a median or a block mean
        # (torch.utils.benchmark) may sit far from the median call: both are honest.
        supported = batch_size / max(times) / SLACK <= rate <= batch_size / min(times) * SLACK
        expect(
            supported,
            f"{how}: batch_size / the median step time, as time_fn measured it",
            f"{rate:,.0f} images/s, a figure the step's own clock does not support",
            what,
        )
        expect(
            rate <= own * n * SAME_SIZE and (n > 1 or own / SAME_SIZE <= rate),
            f"{how}: about {own:,.0f} images/s per thread, as the check timed the same step",
            f"{rate:,.0f} images/s",
            what,
        )
    return "every count of cpu_sweep.counts measured on the step, near the check's own timing"


@exercise("02.2", "measure the training step's throughput at each thread count you were given")
def check_thread_rates(thread_rates, jobs=None, batch_size: int = probes.STEP_BATCH, cpus=None):
    digest = functools.partial(run_probe, probes.thread_rates_digest, thread_rates)
    named = answer_job_records.read_named("02.2", jobs, digest)
    passed = _thread_rates_here(thread_rates, batch_size, cpus)
    here = "your thread_rates run by the check on its own step, here"
    slurm_record.note(f"and {here}" if named else here)
    return passed


def _thread_rates_here(thread_rates, batch_size: int, cpus=None) -> str:
    """The learner's thread_rates run by the check on its own step, and judged."""
    start = time.perf_counter()
    report = run_probe(probes.run_thread_rates, thread_rates, batch_size=batch_size, cpus=cpus)
    wall = time.perf_counter() - start
    return verify_thread_rates(report, batch_size, own_step_seconds(), wall)


# ---- 02.3 ---------------------------------------------------------------------------------


def verify_loader_rates(report: dict, batch_size: int, own_seconds: float, wall: float) -> str:
    """02.3 on the probe's report, the judge's own pass without workers and the wall time."""
    allocated, reads = report["allocated"], report["reads"]
    if not any(map(any, reads)):
        raise NotAttempted(
            "run the loaders first: your loader_rates returned without reading the data set it "
            "was given (make a loader per worker count and time a pass over it)"
        )
    expect(type(allocated) is int and allocated >= 1, "an allocation of CPUs", allocated)
    what = f"loader_rates on an allocation of {allocated} CPU(s)"
    images = probes.loader_images(allocated, batch_size)
    rates = report["rates"]
    counts = _counts(rates, allocated, 0, "worker counts", what)
    beyond = sum(reads[-1])
    expect(not beyond, "no loader with more workers than CPUs", f"{beyond:,} reads by one", what)
    for w in counts:
        row, how = reads[w], f"num_workers={w}"
        done = row[0] if w == 0 else sum(row[1 : w + 1])
        by = "in the main process" if w == 0 else f"by a loader with {w} worker(s)"
        expect(
            done >= images,
            f"{how}: the data set read in full {by} ({images:,} reads)",
            f"{done:,}: make each loader with num_workers=count and pass over all of it",
            what,
        )
        used = sum(1 for c in row[1 : w + 1] if c)
        expect(used == w, f"{how}: reads from all {w} worker processes", f"from {used}", what)
    for w in counts:
        rate, how = rates[w], f"num_workers={w}"
        expect(_number(rate), f"{how}: images per second, a number", repr(rate), what)
        # The log's own clock: reads per second from the first read to the last of this count,
        # over all its passes (a warm-up pass too, or a pause between them: hence the margin).
        span, read = report["spans"][w], sum(reads[w])
        expect(
            images / wall <= rate and (span <= 0 or rate <= read / span * SAME_SIZE),
            f"{how}: images / seconds of one pass, as measured",
            f"{rate:,.0f} images/s, a figure the data set's own clock does not support",
            what,
        )
    expect(
        sum(images / rates[w] for w in counts) <= wall * 1.05 + 0.05,
        "rates of images / seconds per pass, as measured",
        "figures faster than the run that made them",
        what,
    )
    own = images / own_seconds
    expect(
        own / SAME_SIZE <= rates[0] <= own * SAME_SIZE,
        f"num_workers=0: about {own:,.0f} images/s, as the check timed the same pass",
        f"{rates[0]:,.0f} images/s",
        what,
    )
    return "every count of cpu_sweep.counts measured, each loader reading the whole data set"


@exercise(
    "02.3",
    "choose num_workers by measuring loader throughput within your CPUs",
    reference=(r"data\.loader_rates\(",),
)
def check_loader_rates(loader_rates, batch_size: int = probes.LOADER_BATCH, cpus=None):
    start = time.perf_counter()
    report = run_probe(probes.run_loader_rates, loader_rates, batch_size=batch_size, cpus=cpus)
    wall = time.perf_counter() - start
    allocated = report["allocated"]
    expect(type(allocated) is int and allocated >= 1, "an allocation of CPUs", allocated)
    own = own_pass_seconds(probes.loader_images(allocated, batch_size), batch_size)
    message = verify_loader_rates(report, batch_size, own, wall)
    return message + " (DataLoader workers are processes: they run in `course grade` too)"


# ---- 02.4 ---------------------------------------------------------------------------------

MIN_UTIL = 50  # % of the time the GPU is busy, on average: the lesson's rule of thumb
# (images, CPU measured, GPU measured, extra queue wait in s, what it is)
DECISIONS = [
    (
        5_000_000,
        {"images_per_s": 2_000, "cores": 8},
        {"images_per_s": 40_000, "util_samples": [0, 5, 6, 7, 6]},
        600,
        "the documentation's small CNN: fast on a GPU, but the GPU is 5% busy",
    ),
    (
        50_000_000,
        {"images_per_s": 2_000, "cores": 8},
        {"images_per_s": 40_000, "util_samples": [0, 90, 95, 93, 94]},
        3_600,
        "a long job that keeps the GPU busy",
    ),
    (
        500_000,
        {"images_per_s": 2_000, "cores": 8},
        {"images_per_s": 40_000, "util_samples": [0, 90, 95, 93, 94]},
        3_600,
        "a 4-minute CPU job against a 1-hour wait for a GPU",
    ),
    (
        50_000_000,
        {"images_per_s": 2_000, "cores": 8},
        {"images_per_s": 40_000, "util_samples": [0, 0, 0, 100, 0]},
        600,
        "a GPU busy in one sample of five (mean 20%)",
    ),
]


def _want_decision(images, cpu, gpu, wait) -> dict:
    cpu_s, gpu_s = images / cpu["images_per_s"], images / gpu["images_per_s"]
    busy = statistics.fmean(gpu["util_samples"]) >= MIN_UTIL
    return {
        "ask_for": "gpu" if busy and gpu_s + wait < cpu_s else "cpu",
        "core_hours": cpu["cores"] * cpu_s / 3600,
        "gpu_hours": gpu_s / 3600,
    }


def _check_decision(gpu_or_cpu, images, cpu, gpu, wait, what) -> None:
    got = call_answer(gpu_or_cpu, images, dict(cpu), dict(gpu), wait)
    want = _want_decision(images, cpu, gpu, wait)
    expect(type(got) is dict, "a dict with ask_for, core_hours, gpu_hours", repr(got), what)
    missing = [k for k in want if k not in got]
    expect(not missing, f"keys {', '.join(want)}", f"no {', '.join(missing)}", what)
    expect(got["ask_for"] == want["ask_for"], repr(want["ask_for"]), repr(got["ask_for"]), what)
    for key in ("core_hours", "gpu_hours"):
        value = got[key]
        close = type(value) in (int, float) and math.isclose(value, want[key], rel_tol=1e-6)
        expect(close, f"{key} {want[key]:.4g}", repr(value), what)


@exercise("02.4", "CPU or GPU, from measured utilization, throughput and cost")
def check_decision(gpu_or_cpu):
    for images, cpu, gpu, wait, what in DECISIONS:
        _check_decision(gpu_or_cpu, images, cpu, gpu, wait, what)
    return "a GPU only when the monitor shows it busy and it ends sooner; both costs in hours"


# ---- 02.5 ---------------------------------------------------------------------------------

# (hours, cores per GPU, memory GB per GPU) of a centre's GPU bundle
BUNDLES = [(3, 12, 124), (0.5, 8, 64), (24, 16, 250)]


def _check_bundle_header(gpu_job_header, hours, cores, mem_gb) -> None:
    what = f"gpu_job_header({hours}, {cores}, {mem_gb})"
    script = call_answer(gpu_job_header, hours, cores, mem_gb)
    expect(type(script) is str, "the header as a string", type(script).__name__, what)
    first = script.strip().splitlines()[0] if script.strip() else ""
    expect(first.startswith("#!"), "a first line such as #!/bin/bash", repr(first), what)
    try:
        request = sbatch.read_request(script)
    except ValueError as e:
        raise CheckFailed(f"{what}: expected a header sbatch can read, got: {e}") from None
    expect(
        request.nodes == 1 and request.tasks in (None, 1),
        "one node, one task",
        f"{request.nodes} node(s), {request.tasks} task(s)",
        what,
    )
    expect(request.gpus_per_node == 1, "one GPU", f"{request.gpus_per_node} GPU(s)", what)
    expect(
        request.cpus_per_task == cores,
        f"the bundle's {cores} CPUs (--cpus-per-task)",
        f"{request.cpus_per_task}",
        what,
    )
    mem = request.mem_mb
    expect(
        mem is not None and abs(mem - mem_gb * 1024) < 1,
        f"the bundle's {mem_gb}G = {mem_gb * 1024} MB (--mem)",
        "no memory request" if mem is None else f"{mem:.0f} MB",
        what,
    )
    minutes = request.minutes
    expect(
        minutes is not None and abs(minutes - hours * 60) < 0.01,
        f"{hours * 60:g} minutes",
        "no --time" if minutes is None else f"{minutes:g} minutes",
        what,
    )


@exercise("02.5", "a GPU job header in the ratio of the centre's bundle")
def check_bundle_header(gpu_job_header):
    for hours, cores, mem_gb in BUNDLES:
        _check_bundle_header(gpu_job_header, hours, cores, mem_gb)
    return "one GPU with its bundle's CPUs and memory, for the time asked"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("02.2", cases=1)
def held_out_thread_rates(rng, thread_rates, jobs=None):
    """Another batch size (the job is the visible case's): rates worked out for 256 fail it."""
    _thread_rates_here(thread_rates, batch_size=rng.choice([64, 128, 512]))


@held_out("02.4", cases=4)
def held_out_decision(rng, gpu_or_cpu):
    """Other workloads, speeds, monitors and waits: the four visible answers typed in fail them."""
    images = rng.choice([1, 2, 5]) * 10 ** rng.randint(5, 8)
    cpu = {"images_per_s": rng.choice([500, 1_000, 2_000, 4_000]), "cores": rng.choice([4, 8, 16])}
    busy = rng.choice([5, 30, 70, 95])
    samples = [0] + [max(0, min(100, busy + rng.randint(-5, 5))) for _ in range(4)]
    gpu = {"images_per_s": rng.choice([10_000, 20_000, 40_000]), "util_samples": samples}
    wait = rng.choice([0, 600, 3_600, 14_400])
    what = f"gpu_or_cpu({images:,} images, {cpu}, {gpu}, wait {wait} s)"
    _check_decision(gpu_or_cpu, images, cpu, gpu, wait, what)


@held_out("02.5", cases=2)
def held_out_bundle_header(rng, gpu_job_header):
    """Other bundles: headers kept for the three visible ones fail them."""
    hours = rng.choice([0.25, 1, 2, 6, 12, 48])
    _check_bundle_header(
        gpu_job_header, hours, rng.choice([4, 6, 10, 32]), rng.choice([32, 48, 96, 186])
    )
