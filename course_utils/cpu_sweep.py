"""Measuring CPU parallelism on an allocation (lesson 02): the counts a sweep measures, and what
two timings of the same work say.

A sweep of intra-op threads or DataLoader workers measures the counts that double from 1 up to
the allocation, and the allocation itself, as scaling studies do: on 2 CPUs that is every count,
on a 48-CPU node 7 runs rather than 48, and never a count beyond what the job was given (more
threads or workers than CPUs only compete for them). Lesson 02's exercises 02.2 and 02.3 and
their checker read the counts from here.

Two timings of the same work (on 1 thread and on all, one route against another) are compared
as every lesson compares two timings, with `course_utils.paired`: measured in pairs, back to
back, alternating (`on_threads` makes one measurement), and decided by the interval of the
paired ratios; `compared` says the verdict in words.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from course_utils import hpc, paired
from course_utils.timing import time_fn


def counts(allocated: int, start: int = 1) -> list[int]:
    """`start` (1 for threads, 0 for DataLoader workers), then 1, 2, 4, ... below `allocated`,
    and `allocated` itself: counts(6) == [1, 2, 4, 6], counts(2, start=0) == [0, 1, 2]."""
    if type(allocated) is not int or allocated < 1:
        raise ValueError(
            f"allocated={allocated!r} must be a positive int, e.g. hpc.allocated_cpus()"
        )
    if start not in (0, 1):
        raise ValueError(f"start={start!r} must be 1 (threads) or 0 (DataLoader workers)")
    doubling = [2**k for k in range(allocated.bit_length())]
    return sorted({start, *doubling, allocated})


def on_threads(threads: int, fn, *args) -> Callable[[], float]:
    """One measurement for `paired.compare`: the seconds of one call of `fn(*args)` with
    `threads` intra-op threads (`time_fn`, whose first call, untimed, settles the new count);
    the allocation's threads are set back after each."""

    def measure() -> float:
        hpc.configure_threads(threads)
        try:
            return time_fn(fn, *args, warmup=0, min_run_time=1e-3).median
        finally:
            hpc.configure_threads()

    return measure


def compared(verdict: paired.Verdict, other: str) -> str:
    """A paired comparison of timings (`paired.compare(..., higher_is_faster=False)`, `other`
    the baseline) in words: "1.8x faster than on 1 (99% interval 1.7-1.9x, 8 pairs)", "1.3x
    slower than on 1 (...)", "about as fast as on 1 (no difference beyond 5%, 12 pairs)", or
    "undecided after 30 pairs against on 1 (1.04x faster so far)"."""
    ratio, n = verdict.ratio, verdict.pairs
    if verdict.verdict == paired.FASTER:
        return f"{ratio:.3g}x faster than {other} (99% interval {verdict.interval}, {n} pairs)"
    if verdict.verdict == paired.SLOWER:
        times = f"{1 / verdict.high:.2f}-{1 / verdict.low:.2f}x"
        return f"{1 / ratio:.3g}x slower than {other} (99% interval {times}, {n} pairs)"
    if verdict.verdict == paired.SAME:
        return f"about as fast as {other} (no difference beyond {verdict.min_gain:.0%}, {n} pairs)"
    so_far = f"{ratio:.3g}x faster" if ratio >= 1 else f"{1 / ratio:.3g}x slower"
    return f"{verdict.words} against {other} ({so_far} so far)"


def rates_text(rates: dict) -> str:
    """The sweep's result as a job leaves it in sacct's record: '1:812.4,2:1490.0'."""
    return ",".join(f"{n}:{rate:.1f}" for n, rate in sorted(rates.items()))


def median_rates(sweeps: Sequence[dict]) -> dict[int, float]:
    """Several sweeps of the same counts as one: each count's median rate. A node's other work
    can slow one count of one sweep; the median of several (exercise 02.2's job: SWEEPS in
    course_utils.jobs.thread_sweep) keeps that out of the sweep's shape.
    ValueError naming the counts where the sweeps measured different ones."""
    if not sweeps:
        raise ValueError("sweeps=[]: give at least one sweep ({threads: images per second})")
    for sweep in sweeps:
        if not isinstance(sweep, dict):
            raise TypeError(f"{sweep!r} is not a sweep: expected {{threads: images per second}}")
    want = sorted(sweeps[0])
    for sweep in sweeps[1:]:
        if sorted(sweep) != want:
            raise ValueError(
                f"one sweep measured counts {sorted(sweep)}, another {want}: every sweep of a "
                "job measures the same counts (cpu_sweep.counts of its CPUs)"
            )
    return {n: statistics.median(sweep[n] for sweep in sweeps) for n in want}


def parse_rates(text: str) -> dict[int, float]:
    """`rates_text` read back; ValueError naming the text where it is not one."""
    try:
        pairs = [item.split(":") for item in text.split(",")]
        return {int(n): float(rate) for n, rate in pairs}
    except ValueError:
        raise ValueError(f"{text!r} is not a sweep's rates ('1:812.4,2:1490.0')") from None
