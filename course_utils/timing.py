"""Timing done right: warm-up, synchronization on accelerators, median and spread.

Built on torch.utils.benchmark.Timer, which picks the number of repetitions itself
(`blocked_autorange`). Its default clock synchronizes only the current accelerator (and, in
older PyTorch, only CUDA), so `time_fn` hands it a clock that synchronizes the devices the
call's tensors live on. `naive_vs_synced` shows what goes wrong without that; `copy_bandwidth`
times copies between devices with it.
"""

from __future__ import annotations

import logging
import statistics
import time
import timeit
from dataclasses import dataclass

import torch

from course_utils.device import synchronize

# torch.utils.benchmark imports cpp_extension, which warns "No CUDA runtime is found" on CPU-only
# machines that have a CUDA toolkit; that line says nothing about timing and confuses learners.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
import torch.utils.benchmark as benchmark  # noqa: E402


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
        timer=_synchronizing_clock(devices),
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


def _synchronizing_clock(devices: list[torch.device]):
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
