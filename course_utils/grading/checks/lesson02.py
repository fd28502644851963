"""Checkers of lesson 02, from CPU to GPU and CPU parallelism.

The device exercises are checked on the `meta` device, which every PyTorch has: it keeps shapes,
dtypes and device placement without memory, so moving data there proves the code is device-agnostic.
"""

import math
import statistics
import unittest.mock

import torch

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


@exercise("02.2", "move a batch to the model's device")
def check_to_device(batch_to):
    inputs, targets = torch.randn(4, 3, 32, 32), torch.tensor([1, 2, 3, 4])
    got = call_answer(batch_to, (inputs, targets), torch.device("meta"))
    expect(
        isinstance(got, tuple) and len(got) == 2, "a tuple (inputs, targets)", type(got).__name__
    )
    devices = [t.device.type for t in got]
    expect(devices == ["meta", "meta"], "both tensors on the meta device", devices)
    expect(
        got[0].dtype == torch.float32 and got[1].dtype == torch.int64,
        "dtypes kept (float32, int64)",
        [t.dtype for t in got],
    )
    return "inputs and targets follow the model to its device"


@exercise("02.3", "noise that matches a tensor's device and dtype")
def check_like(add_noise):
    for x in (torch.zeros(3, 2, dtype=torch.float64), torch.zeros(5, device="meta")):
        got = call_answer(add_noise, x, 0.1)
        expect(
            got.device == x.device and got.dtype == x.dtype,
            f"device {x.device} and dtype {x.dtype}",
            f"device {got.device}, dtype {got.dtype}",
            "noise for a tensor on another device or in another dtype",
        )
        expect(got.shape == x.shape, f"shape {tuple(x.shape)}", tuple(got.shape))
    cpu = torch.zeros(10_000, dtype=torch.float64)
    std = float(call_answer(add_noise, cpu, 0.1).std())
    expect(abs(std - 0.1) < 0.01, "noise with standard deviation 0.1", f"{std:.3f}")
    return "randn_like / new_* keep the device and dtype of their model tensor"


# (device, environment, what it is) -> (num_workers, pin_memory)
LOADER_CASES = [
    (torch.device("cuda"), {"SLURM_CPUS_PER_TASK": "8"}, "a GPU job with --cpus-per-task=8"),
    (torch.device("cuda", 1), {"SLURM_CPUS_PER_TASK": "12"}, "cuda:1 with --cpus-per-task=12"),
    (torch.device("cuda"), {}, "a GPU outside Slurm"),
    (torch.device("cpu"), {"SLURM_CPUS_PER_TASK": "8"}, "a CPU job with --cpus-per-task=8"),
    (torch.device("mps"), {}, "Apple's mps"),
]


def _want_loader(device: torch.device, environ: dict) -> tuple[int, bool]:
    # pinned memory only speeds up copies to a GPU
    return hpc.loader_workers(device, environ), device.type == "cuda"


@exercise("02.4", "DataLoader workers and pinned memory from the allocation")
def check_loader_settings(loader_settings):
    for device, environ, what in LOADER_CASES:
        got = call_answer(loader_settings, device, dict(environ))
        expect(isinstance(got, dict), "a dict of make_loader arguments", type(got).__name__, what)
        expect(set(got) == {"num_workers", "pin_memory"}, "the keys num_workers and pin_memory",
               sorted(got), what)  # fmt: skip
        workers, pin = _want_loader(device, environ)
        got_workers = got["num_workers"]
        expect(type(got_workers) is int and got_workers == workers, f"num_workers={workers}",
               f"num_workers={got_workers!r}", what)  # fmt: skip
        expect(got["pin_memory"] is pin, f"pin_memory={pin}", f"pin_memory={got['pin_memory']!r}",
               what)  # fmt: skip
    return "a worker per allocated CPU and pinned memory for a GPU; the CPUs compute in a CPU job"


MIN_UTIL = 50  # % of the time the GPU is busy, on average: the lesson's rule of thumb
# (images, CPU measured, GPU measured, extra queue wait in s, what it is)
DECISIONS = [
    (5_000_000, {"images_per_s": 2_000, "cores": 8},
     {"images_per_s": 40_000, "util_samples": [0, 5, 6, 7, 6]}, 600,
     "the documentation's small CNN: fast on a GPU, but the GPU is 5% busy"),
    (50_000_000, {"images_per_s": 2_000, "cores": 8},
     {"images_per_s": 40_000, "util_samples": [0, 90, 95, 93, 94]}, 3_600,
     "a long job that keeps the GPU busy"),
    (500_000, {"images_per_s": 2_000, "cores": 8},
     {"images_per_s": 40_000, "util_samples": [0, 90, 95, 93, 94]}, 3_600,
     "a 4-minute CPU job against a 1-hour wait for a GPU"),
    (50_000_000, {"images_per_s": 2_000, "cores": 8},
     {"images_per_s": 40_000, "util_samples": [0, 0, 0, 100, 0]}, 600,
     "a GPU busy in one sample of five (mean 20%)"),
]  # fmt: skip


def _want_decision(images, cpu, gpu, wait) -> dict:
    cpu_s, gpu_s = images / cpu["images_per_s"], images / gpu["images_per_s"]
    busy = statistics.fmean(gpu["util_samples"]) >= MIN_UTIL
    return {
        "ask_for": "gpu" if busy and gpu_s + wait < cpu_s else "cpu",
        "core_hours": cpu["cores"] * cpu_s / 3600,
        "gpu_hours": gpu_s / 3600,
    }


@exercise("02.5", "CPU or GPU, from measured utilization, throughput and cost")
def check_decision(gpu_or_cpu):
    for images, cpu, gpu, wait, what in DECISIONS:
        got = call_answer(gpu_or_cpu, images, dict(cpu), dict(gpu), wait)
        expect(isinstance(got, dict), "a dict with ask_for, core_hours, gpu_hours",
               type(got).__name__, what)  # fmt: skip
        want = _want_decision(images, cpu, gpu, wait)
        missing = [k for k in want if k not in got]
        expect(not missing, f"keys {', '.join(want)}", f"no {', '.join(missing)}", what)
        expect(got["ask_for"] == want["ask_for"], repr(want["ask_for"]), repr(got["ask_for"]),
               what)  # fmt: skip
        for key in ("core_hours", "gpu_hours"):
            close = isinstance(got[key], (int, float)) and math.isclose(got[key], want[key],
                                                                       rel_tol=1e-6)  # fmt: skip
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
    expect(request.nodes == 1 and request.tasks in (None, 1), "one node, one task",
           f"{request.nodes} node(s), {request.tasks} task(s)", what)  # fmt: skip
    expect(request.gpus_per_node == 1, "one GPU", f"{request.gpus_per_node} GPU(s)", what)
    expect(request.cpus_per_task == cores, f"the bundle's {cores} CPUs (--cpus-per-task)",
           f"{request.cpus_per_task}", what)  # fmt: skip
    mem = request.mem_mb
    expect(mem is not None and abs(mem - mem_gb * 1024) < 1,
           f"the bundle's {mem_gb}G = {mem_gb * 1024} MB (--mem)",
           "no memory request" if mem is None else f"{mem:.0f} MB", what)  # fmt: skip
    minutes = request.minutes
    expect(minutes is not None and abs(minutes - hours * 60) < 0.01, f"{hours * 60:g} minutes",
           "no --time" if minutes is None else f"{minutes:g} minutes", what)  # fmt: skip


@exercise("02.6", "a GPU job header in the ratio of the centre's bundle")
def check_bundle_header(gpu_job_header):
    for hours, cores, mem_gb in BUNDLES:
        script = call_answer(gpu_job_header, hours, cores, mem_gb)
        expect(isinstance(script, str), "the header as a string", type(script).__name__)
        _check_bundle_header(script, hours, cores, mem_gb)
    return "one GPU with its bundle's CPUs and memory, for the time asked"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("02.5", cases=4)
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
    expect(got.get("ask_for") == want["ask_for"], repr(want["ask_for"]), repr(got.get("ask_for")),
           what)  # fmt: skip
    for key in ("core_hours", "gpu_hours"):
        value = got.get(key)
        close = isinstance(value, (int, float)) and math.isclose(value, want[key], rel_tol=1e-6)
        expect(close, f"{key} {want[key]:.4g}", repr(value), what)
