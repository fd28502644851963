"""Checkers of lesson 02, from CPU to GPU and CPU parallelism.

02.1 is checked with torch.cuda.is_available patched both ways. 02.2 and 02.3 are measurements: the
check hands the learner's function a step or a data set that logs what really ran (thread counts
and step times; reads per DataLoader worker) and compares the learner's figures with that log.
"""

import math
import statistics
import time
import unittest.mock

import torch
from torch.utils.data import Dataset, get_worker_info

from course_utils import hpc, sbatch
from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out


@exercise("02.1", "the --disable-cuda pattern")
def check_choose_device(choose_device):
    with unittest.mock.patch("torch.cuda.is_available", return_value=True):
        on_gpu_node = call_answer(choose_device, False)
        disabled = call_answer(choose_device, True)
    with unittest.mock.patch("torch.cuda.is_available", return_value=False):
        on_cpu_node = call_answer(choose_device, False)
    for got in (on_gpu_node, disabled, on_cpu_node):
        expect(isinstance(got, torch.device), "a torch.device", type(got).__name__)
    expect(
        on_gpu_node.type == "cuda",
        "cuda when a GPU is available",
        on_gpu_node,
        "choose_device(False)",
    )
    expect(
        disabled.type == "cpu", "cpu when --disable-cuda is given", disabled, "choose_device(True)"
    )
    expect(
        on_cpu_node.type == "cpu",
        "cpu when no GPU is available",
        on_cpu_node,
        "choose_device(False)",
    )
    return "GPU when there is one, CPU when asked or when there is none"


class CountedStep:
    """A training-step stand-in that logs, per call, torch's thread count and its own seconds."""

    def __init__(self, size: int = 384):
        generator = torch.Generator().manual_seed(0)
        self.a = torch.randn(size, size, generator=generator)
        self.b = torch.randn(size, size, generator=generator)
        self.calls: list[tuple[int, float]] = []

    def __call__(self):
        start = time.perf_counter()
        torch.mm(self.a, self.b).sum()
        self.calls.append((torch.get_num_threads(), time.perf_counter() - start))


def verify_thread_rates(rates, calls, allocated: int, restored: int, batch_size: int) -> str:
    """The checks of 02.2 on what the learner's run returned and what the step logged."""
    what = f"thread_rates on an allocation of {allocated} CPU(s)"
    expect(
        isinstance(rates, dict) and rates,
        "a dict {threads: images per second}",
        type(rates).__name__,
        what,
    )
    counts = sorted(rates)
    outside = [n for n in counts if not (isinstance(n, int) and 1 <= n <= allocated)]
    expect(
        not outside,
        f"thread counts from 1 to the {allocated} allocated CPUs (hpc.allocated_cpus())",
        f"{outside}",
        what,
    )
    expect(1 in rates and allocated in rates, f"1 and {allocated} among them", counts, what)
    expect(
        restored == allocated,
        f"torch's threads back at {allocated} afterwards (hpc.configure_threads())",
        f"{restored}",
        what,
    )
    for n in counts:
        times = [s for threads, s in calls if threads == n]
        expect(
            len(times) >= 3,
            f"the step run at least 3 times with {n} thread(s)",
            f"{len(times)} time(s): set the threads before timing",
            what,
        )
        # Supported: a rate between those of the slowest and the fastest call the step's own clock
        # saw (with a margin). Under load one call can take many times another, so a median or
        # a block mean (torch.utils.benchmark) may sit far from the median call: both are honest.
        slowest, fastest = batch_size / max(times), batch_size / min(times)
        rate = rates[n]
        close = isinstance(rate, (int, float)) and slowest / 1.5 <= rate <= fastest * 1.5
        expect(
            close,
            f"{n} thread(s): a rate of batch_size / the median step time, as time_fn measured it",
            "a figure the step's own clock does not support",
            what,
        )
    return "every thread count from 1 to the allocated CPUs measured on the step"


@exercise("02.2", "measure the training step's throughput at each thread count you were given")
def check_thread_rates(thread_rates):
    step, batch_size = CountedStep(), 256
    try:
        rates = call_answer(thread_rates, step, batch_size)
    finally:
        restored = torch.get_num_threads()
        hpc.configure_threads()
    return verify_thread_rates(rates, step.calls, hpc.allocated_cpus(), restored, batch_size)


class CountedReads(Dataset):
    """Small images that count, per DataLoader worker, how often each process read one."""

    def __init__(self, n: int, max_workers: int):
        self.images = torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(0))
        self.reads = torch.zeros(max_workers + 1, dtype=torch.int64).share_memory_()

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        info = get_worker_info()
        self.reads[0 if info is None else info.id + 1] += 1  # one slot per process: no race
        return self.images[i], 0


def verify_loader_rates(rates, reads: list[int], images: int, allocated: int, seconds: float):
    """The checks of 02.3 on the rates returned, the data set's read counts and the wall time."""
    what = f"loader_rates on an allocation of {allocated} CPU(s)"
    expect(
        isinstance(rates, dict) and rates,
        "a dict {num_workers: images per second}",
        type(rates).__name__,
        what,
    )
    counts = sorted(rates)
    outside = [w for w in counts if not (isinstance(w, int) and 0 <= w <= allocated)]
    expect(
        not outside,
        f"worker counts from 0 to the {allocated} allocated CPUs "
        "(more workers than CPUs compete for them)",
        f"{outside}",
        what,
    )
    expect(0 in rates and max(counts) >= 1, "0 and at least one worker count", counts, what)
    expect(
        sum(reads) >= images * len(rates),
        f"the data set read in full for each of the "
        f"{len(rates)} settings ({images * len(rates):,} reads)",
        f"{sum(reads):,}",
        what,
    )
    workers = max(counts)
    used = [slot for slot in range(1, len(reads)) if reads[slot]]
    expect(
        len(used) >= workers,
        f"reads from {workers} worker processes (num_workers={workers})",
        f"reads from {len(used)}",
        what,
    )
    passes = sum(images / r for r in rates.values() if isinstance(r, (int, float)) and r > 0)
    expect(
        len([r for r in rates.values() if isinstance(r, (int, float)) and r > 0]) == len(rates)
        and passes <= seconds * 1.05,
        "rates of images / seconds per pass, as measured",
        "figures faster than the run that made them",
        what,
    )
    return "0 workers up to the allocated CPUs measured, each reading the whole data set"


@exercise("02.3", "choose num_workers by measuring loader throughput within your CPUs")
def check_loader_rates(loader_rates):
    allocated = hpc.allocated_cpus()
    dataset = CountedReads(1024, allocated)
    start = time.perf_counter()
    rates = call_answer(loader_rates, dataset, 64)
    seconds = time.perf_counter() - start
    message = verify_loader_rates(rates, dataset.reads.tolist(), len(dataset), allocated, seconds)
    return message + " (DataLoader workers are processes: they run in `course grade` too)"


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


@exercise("02.4", "CPU or GPU, from measured utilization, throughput and cost")
def check_decision(gpu_or_cpu):
    for images, cpu, gpu, wait, what in DECISIONS:
        got = call_answer(gpu_or_cpu, images, dict(cpu), dict(gpu), wait)
        expect(
            isinstance(got, dict),
            "a dict with ask_for, core_hours, gpu_hours",
            type(got).__name__,
            what,
        )
        want = _want_decision(images, cpu, gpu, wait)
        missing = [k for k in want if k not in got]
        expect(not missing, f"keys {', '.join(want)}", f"no {', '.join(missing)}", what)
        expect(got["ask_for"] == want["ask_for"], repr(want["ask_for"]), repr(got["ask_for"]), what)
        for key in ("core_hours", "gpu_hours"):
            close = isinstance(got[key], (int, float)) and math.isclose(
                got[key], want[key], rel_tol=1e-6
            )
            expect(close, f"{key} {want[key]:.4g}", f"{got[key]!r}", what)
    return "a GPU only when the monitor shows it busy and it ends sooner; both costs in hours"


# (hours, cores per GPU, memory GB per GPU) of a centre's GPU bundle
BUNDLES = [(3, 12, 124), (0.5, 8, 64), (24, 16, 250)]


def _check_bundle_header(script: str, hours, cores, mem_gb) -> None:
    what = f"gpu_job_header({hours}, {cores}, {mem_gb})"
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
        script = call_answer(gpu_job_header, hours, cores, mem_gb)
        expect(isinstance(script, str), "the header as a string", type(script).__name__)
        _check_bundle_header(script, hours, cores, mem_gb)
    return "one GPU with its bundle's CPUs and memory, for the time asked"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("02.4", cases=4)
def held_out_decision(rng, gpu_or_cpu):
    """Other workloads, speeds, monitors and waits: the four visible answers typed in fail them."""
    images = rng.choice([1, 2, 5]) * 10 ** rng.randint(5, 8)
    cpu = {"images_per_s": rng.choice([500, 1_000, 2_000, 4_000]), "cores": rng.choice([4, 8, 16])}
    busy = rng.choice([5, 30, 70, 95])
    samples = [0] + [max(0, min(100, busy + rng.randint(-5, 5))) for _ in range(4)]
    gpu = {"images_per_s": rng.choice([10_000, 20_000, 40_000]), "util_samples": samples}
    wait = rng.choice([0, 600, 3_600, 14_400])
    got = call_answer(gpu_or_cpu, images, dict(cpu), dict(gpu), wait)
    want = _want_decision(images, cpu, gpu, wait)
    what = f"gpu_or_cpu({images:,} images, {cpu}, {gpu}, wait {wait} s)"
    expect(isinstance(got, dict), "a dict", type(got).__name__, what)
    expect(
        got.get("ask_for") == want["ask_for"], repr(want["ask_for"]), repr(got.get("ask_for")), what
    )
    for key in ("core_hours", "gpu_hours"):
        value = got.get(key)
        close = isinstance(value, (int, float)) and math.isclose(value, want[key], rel_tol=1e-6)
        expect(close, f"{key} {want[key]:.4g}", repr(value), what)
