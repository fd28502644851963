"""Timing done right: warm-up, synchronization on accelerators, median and spread.

Built on torch.utils.benchmark.Timer, which picks the number of repetitions itself
(`blocked_autorange`). Its default clock synchronizes only the current accelerator (and, in
older PyTorch, only CUDA), so `time_fn` hands it a clock that synchronizes the devices the
call's tensors live on. `naive_vs_synced` shows what goes wrong without that; `copy_bandwidth`
times copies between devices with it. `call_spread` and `cpu_load` show why two timings of the
same call can disagree on a shared machine, and `images_per_second` measures a training loop's
throughput (warm-up, synchronized ends). Taught in lesson 03; lesson 02 first uses `time_fn`.
"""

from __future__ import annotations

import os
import statistics
import time
import timeit
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.utils.benchmark as benchmark
from torch.utils.benchmark.utils.common import set_torch_threads

from course_utils.device import synchronize


@dataclass(frozen=True)
class Timing:
    median: float  # seconds per call
    iqr: float  # interquartile range, seconds
    runs: int  # measured blocks
    number_per_run: int  # calls per block

    def __str__(self) -> str:
        return f"{_fmt(self.median)} per call (median; IQR {_fmt(self.iqr)}, {self.runs} runs)"


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def time_fn(
    fn,
    *args,
    warmup: int = 2,
    min_run_time: float = 0.2,
    num_threads: int | None = None,
    label: str = "",
    sync_device: torch.device | str | None = None,
    **kwargs,
) -> Timing:
    """Time `fn(*args, **kwargs)`: `warmup` untimed calls, then blocks for >= `min_run_time` s.

    The clock synchronizes `sync_device`, else every device the tensor arguments live on, else
    the current CUDA device when there is one, so queued GPU work is inside the measurement.
    """
    if warmup < 0 or min_run_time <= 0:
        raise ValueError(f"warmup={warmup} must be >= 0 and min_run_time={min_run_time} > 0")
    for _ in range(warmup):
        fn(*args, **kwargs)
    devices = [torch.device(sync_device)] if sync_device else _devices(args, kwargs)
    timer = benchmark.Timer(
        stmt="fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs},
        num_threads=num_threads or torch.get_num_threads(),
        label=label,
        timer=synchronizing_clock(devices),
    )
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Timing(m.median, m.iqr, len(m.times), m.number_per_run)


def copy_bandwidth(
    src: torch.Tensor,
    device: torch.device | str,
    non_blocking: bool = False,
    min_run_time: float = 0.3,
) -> float:
    """GB/s (1e9 bytes per second) of copying `src` to `device`: the median of `time_fn`.

    `time_fn`'s clock synchronizes `device` before it starts and before it stops, so an
    asynchronous copy (`non_blocking=True` from pinned memory) is timed to its end without a
    synchronize in the timed call. `copy=True` makes a copy even when `src` is on `device`
    already, so on the CPU this measures a host-memory copy by the same code path.
    Taught in lesson 02; `python -m benchmarks.h2d_bandwidth` measures with it.
    """
    device = torch.device(device)
    t = time_fn(
        lambda: src.to(device, non_blocking=non_blocking, copy=True),
        sync_device=device,
        min_run_time=min_run_time,
    )
    return src.numel() * src.element_size() / t.median / 1e9


def _devices(args, kwargs) -> list[torch.device]:
    """Devices of the tensor arguments; the current CUDA device if none is on an accelerator."""
    found = {v.device for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)}
    found.discard(torch.device("cpu"))
    if not found and torch.cuda.is_available():
        found.add(torch.device("cuda", torch.cuda.current_device()))
    return sorted(found, key=str)


def synchronizing_clock(devices: list[torch.device]):
    """A clock for torch.utils.benchmark.Timer that first waits for `devices`: queued work on
    them lands inside the measurement (`time_fn`; lesson 08's `throughput.Warm`)."""

    def clock() -> float:
        for device in devices:
            synchronize(device)
        return timeit.default_timer()

    return clock


@dataclass(frozen=True)
class NaiveVsSynced:
    naive: float  # median seconds per call, host clock only: measures the launch
    synced: float  # median seconds per call, synchronized before and after: measures the work
    device: str
    repeats: int

    def __str__(self) -> str:
        return (
            f"{self.device}: naive {_fmt(self.naive)}, synchronized {_fmt(self.synced)} per call "
            f"(median of {self.repeats})"
        )


def naive_vs_synced(fn, *args, device="cpu", repeats: int = 10, warmup: int = 2, **kwargs):
    """Time `fn(*args, **kwargs)` on `device` twice: with a bare host clock, and correctly.

    Naive: perf_counter around the call, as if the call were finished when it returns. On a GPU
    that measures only the launch. Synchronized: wait for the device before starting the clock
    and before stopping it. Each naive call starts on an idle device (synchronized, untimed), so
    the two medians differ only by the waiting. On the CPU, which runs synchronously, they agree.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats={repeats} must be >= 1 and warmup={warmup} >= 0")
    device = torch.device(device)
    for _ in range(warmup):
        fn(*args, **kwargs)
    naive, synced = [], []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn(*args, **kwargs)
        naive.append(time.perf_counter() - start)
        synchronize(device)  # untimed: the next measurement starts on an idle device
        start = time.perf_counter()
        fn(*args, **kwargs)
        synchronize(device)
        synced.append(time.perf_counter() - start)
    return NaiveVsSynced(statistics.median(naive), statistics.median(synced), str(device), repeats)


@dataclass(frozen=True)
class Spread:
    fastest: float  # seconds, the fastest single call
    median: float
    slowest: float
    calls: int

    def __str__(self) -> str:
        return (
            f"single calls: fastest {_fmt(self.fastest)}, median {_fmt(self.median)}, "
            f"slowest {_fmt(self.slowest)} ({self.calls} calls)"
        )


def call_spread(
    fn,
    *args,
    calls: int = 50,
    warmup: int = 2,
    num_threads: int | None = None,
    sync_device: torch.device | str | None = None,
    **kwargs,
) -> Spread:
    """Time `calls` single calls of `fn(*args, **kwargs)`, each on a synchronized clock.

    Unlike `time_fn`, which reports the median of blocks of calls, this keeps every call: the
    slowest ones show interruptions (other processes, a descheduled thread) that a block's mean
    absorbs. `num_threads` sets torch's intra-op threads for the measurement only.
    """
    if calls < 1 or warmup < 0:
        raise ValueError(f"calls={calls} must be >= 1 and warmup={warmup} >= 0")
    devices = [torch.device(sync_device)] if sync_device else _devices(args, kwargs)
    clock = synchronizing_clock(devices)
    with set_torch_threads(num_threads or torch.get_num_threads()):
        for _ in range(warmup):
            fn(*args, **kwargs)
        times = []
        for _ in range(calls):
            start = clock()
            fn(*args, **kwargs)
            times.append(clock() - start)
    return Spread(min(times), statistics.median(times), max(times), calls)


@dataclass(frozen=True)
class CpuLoad:
    """How busy the machine's CPUs are: other processes' work slows timings and scatters them."""

    load_1min: float  # runnable tasks averaged over a minute, this process's threads included
    cpus: int  # CPUs of the whole machine (the load average counts all of them)
    waiting: float | None  # share of the last 10 s in which runnable tasks waited for a CPU

    @property
    def contended(self) -> bool:
        if self.waiting is not None:  # pressure counts only waiting, not our own running
            return self.waiting > 0.10
        return self.load_1min > self.cpus

    def __str__(self) -> str:
        text = f"load average {self.load_1min:.1f} on {self.cpus} CPUs"
        if self.waiting is not None:
            text += f", tasks waited for a CPU {self.waiting:.0%} of the last 10 s"
        verdict = "other work competes for these CPUs" if self.contended else "no contention"
        return f"{text}: {verdict}"


def cpu_load() -> CpuLoad:
    """The machine's load average and, on Linux, its CPU pressure (PSI, /proc/pressure/cpu)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return CpuLoad(load, os.cpu_count() or 1, _cpu_pressure())


def _cpu_pressure(path: str = "/proc/pressure/cpu") -> float | None:
    """'some avg10' of Linux pressure stall information as a fraction, or None where absent."""
    try:
        first = Path(path).read_text().splitlines()[0]  # "some avg10=1.23 avg60=... total=..."
    except (OSError, IndexError):
        return None
    fields = dict(part.split("=") for part in first.split()[1:])
    return float(fields["avg10"]) / 100 if "avg10" in fields else None


def images_per_second(
    train_step, batches, synchronize=None, clock=time.perf_counter, warmup: int = 2
) -> float:
    """Steady-state throughput of `train_step(batch)` over `batches`, in images per second.

    The first `warmup` batches run untimed: they pay one-time costs (CUDA context, cuDNN
    autotuning, the allocator growing). The clock starts on an idle device and stops when the
    device has finished; nothing waits inside the loop, so the host queues work as it does in
    training. Counts the images of the timed batches (a batch, or the first item of a tuple
    batch, has len() images). `synchronize` defaults to waiting for the available accelerator.
    Taught in lesson 03 (exercise 03.3 repairs a timing that lacks all this).
    """
    batches = list(batches)
    if not 0 <= warmup < len(batches):
        raise ValueError(
            f"warmup={warmup} must leave batches to time: got {len(batches)} batches; "
            "pass more batches or a smaller warmup"
        )
    synchronize = synchronize or _synchronize_accelerator
    for batch in batches[:warmup]:
        train_step(batch)
    synchronize()  # queued warm-up work must not count
    start = clock()
    for batch in batches[warmup:]:
        train_step(batch)
    synchronize()  # the timed steps' queued work must count
    return sum(_images(b) for b in batches[warmup:]) / (clock() - start)


def _images(batch) -> int:
    return len(batch[0]) if isinstance(batch, (tuple, list)) else len(batch)


def _synchronize_accelerator() -> None:
    if torch.cuda.is_available():
        synchronize(torch.device("cuda", torch.cuda.current_device()))
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        synchronize(torch.device("mps"))


def suggest_threads(load: CpuLoad, allocated: int) -> int:
    """Threads for PyTorch's CPU work: all `allocated` CPUs, or one when other work competes.

    An op on n threads ends when its slowest thread does; on cores shared with other processes a
    descheduled thread stalls the whole op, and one thread loses far less (lesson 03 measures it).
    """
    if allocated < 1:
        raise ValueError(f"allocated={allocated} CPUs: must be at least 1 (hpc.allocated_cpus())")
    return 1 if load.contended else allocated
