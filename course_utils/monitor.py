"""Utilization logged in the background while training runs: is the GPU (or CPU) kept busy?

    with Monitor(pick_probe(device)) as mon:
        train(...)
    print(mon.summary())

A probe is a function returning {metric: value}; `Monitor` calls it every `interval` seconds on
a thread. `gpu_probe` reads NVML (the nvidia-ml-py package, when installed) or `nvidia-smi`;
`cpu_probe` reads this process's CPU time, as a percentage of the CPUs allocated to it.
A GPU that sits well below 100% while training is waiting: for data, for the host, for copies.
Taught in lesson 02; lesson 08 watches a tuned job with it.
"""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from course_utils import hpc, processes

Probe = Callable[[], dict[str, float]]
SMI_QUERY = "utilization.gpu,memory.used"


@dataclass(frozen=True)
class Sample:
    seconds: float  # since the monitor started
    values: dict[str, float]


def parse_smi(text: str, index: int = 0) -> dict[str, float]:
    """{"gpu %", "memory MiB"} of GPU `index` from `nvidia-smi --query-gpu=utilization.gpu,
    memory.used --format=csv,noheader,nounits` output (one line per GPU)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if index >= len(lines):
        raise ValueError(f"nvidia-smi listed {len(lines)} GPU(s); GPU {index} is not among them")
    util, memory = (float(field) for field in lines[index].split(",")[:2])
    return {"gpu %": util, "memory MiB": memory}


def _nvml_probe(index: int) -> Probe | None:
    try:
        import pynvml  # the nvidia-ml-py package

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # not installed, or no driver: fall back to nvidia-smi
        return None

    def probe():
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        return {
            "gpu %": float(util.gpu),
            "memory MiB": pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20,
        }

    return probe


def gpu_probe(index: int = 0, nvidia_smi: str = "nvidia-smi") -> Probe | None:
    """A probe of GPU `index` through NVML, else `nvidia-smi`; None when neither is there."""
    probe = _nvml_probe(index)
    if probe is not None:
        return probe
    exe = shutil.which(nvidia_smi)
    if exe is None:
        return None
    command = [exe, f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits"]

    def smi_probe():
        done = processes.run(command, timeout=10)
        if not done.ok:  # the Monitor records the error and keeps sampling
            raise RuntimeError(f"nvidia-smi failed ({done.describe()}): {done.stderr.strip()}")
        return parse_smi(done.stdout, index)

    return smi_probe


def cpu_probe(cpus: int | None = None) -> Probe:
    """A probe of this process's CPU use since the previous call, in % of `cpus` (allocated)."""
    cpus = cpus or hpc.allocated_cpus()
    last = [time.perf_counter(), _cpu_seconds()]

    def probe():
        now, used = time.perf_counter(), _cpu_seconds()
        busy = (used - last[1]) / max(now - last[0], 1e-9)
        last[:] = [now, used]
        # The two clocks are read a moment apart: a fully busy process can come out a percent
        # or so above its CPUs. No process uses more than the CPUs it may run on.
        return {"cpu %": min(100.0, 100 * busy / cpus)}

    return probe


def _cpu_seconds() -> float:
    """CPU seconds of this process (all threads, nanosecond clock) and its finished children.

    os.times() alone counts in clock ticks (10 ms): over a 0.25 s sample that is a 4% error, and
    a busy process showed "max 102%" of its CPUs."""
    children = os.times()
    return time.process_time() + children.children_user + children.children_system


def pick_probe(device) -> tuple[str, Probe]:
    """("gpu", probe) on a CUDA device with NVML or nvidia-smi, else ("cpu", cpu_probe())."""
    device = torch.device(device)
    if device.type == "cuda":
        probe = gpu_probe(device.index or 0)
        if probe is not None:
            return "gpu", probe
        print("monitor: no NVML or nvidia-smi found; logging this process's CPU use instead")
    return "cpu", cpu_probe()


class Monitor:
    """Context manager: call `probe` every `interval` seconds on a background thread."""

    def __init__(self, probe: Probe | tuple[str, Probe], interval: float = 0.5):
        if interval <= 0:
            raise ValueError(f"interval={interval} must be > 0 seconds, e.g. 0.5")
        self.probe = probe[1] if isinstance(probe, tuple) else probe
        self.interval = interval
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self._stop = threading.Event()

    def __enter__(self) -> Monitor:
        self._start = time.perf_counter()
        self.probe()  # first call: primes a delta probe and fails early if the tool is broken
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> bool:
        self._stop.set()
        self._thread.join()
        self._sample()  # the last stretch, so a short run still has one sample
        return False

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        try:
            values = self.probe()
        except Exception as e:  # a failing nvidia-smi must not kill the training it watches
            self.errors.append(f"{type(e).__name__}: {e}")
            return
        self.samples.append(Sample(time.perf_counter() - self._start, values))

    def series(self, metric: str) -> list[float]:
        return [s.values[metric] for s in self.samples if metric in s.values]

    def summary(self) -> dict[str, dict[str, float]]:
        """{metric: {"mean", "max", "samples"}} over the samples taken."""
        metrics = sorted({k for s in self.samples for k in s.values})
        return {
            m: {"mean": statistics.fmean(v), "max": max(v), "samples": len(v)}
            for m in metrics
            for v in [self.series(m)]
        }
