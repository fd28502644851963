"""Timing done right: warm-up, synchronization on accelerators, median and spread.

Built on torch.utils.benchmark.Timer, which synchronizes CUDA around each measurement and
picks the number of repetitions itself (`blocked_autorange`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

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
    **kwargs,
) -> Timing:
    """Time `fn(*args, **kwargs)`: `warmup` untimed calls, then blocks for >= `min_run_time` s."""
    if warmup < 0 or min_run_time <= 0:
        raise ValueError(f"warmup={warmup} must be >= 0 and min_run_time={min_run_time} > 0")
    for _ in range(warmup):
        fn(*args, **kwargs)
    timer = benchmark.Timer(
        stmt="fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs},
        num_threads=num_threads or torch.get_num_threads(),
        label=label,
    )
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Timing(m.median, m.iqr, len(m.times), m.number_per_run)
