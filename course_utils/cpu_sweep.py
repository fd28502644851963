"""Measuring CPU parallelism on an allocation (lesson 02): the counts a sweep measures, and what
two timings of the same work say.

A sweep of intra-op threads or DataLoader workers measures the counts that double from 1 up to
the allocation, and the allocation itself, as scaling studies do: on 2 CPUs that is every count,
on a 48-CPU node 7 runs rather than 48, and never a count beyond what the job was given (more
threads or workers than CPUs only compete for them). Lesson 02's exercises 02.2 and 02.3 and
their checker read the counts from here.
"""

from __future__ import annotations

SAME = 0.1  # two timings within 10% of each other: "about as fast"


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


def compared(seconds: float, baseline: float, other: str) -> str:
    """`seconds` against `baseline`, the same work timed as `other` says, in words:
    "1.8x faster than on 1", "1.3x slower than on 1", "about as fast as on 1 (within 10%)"."""
    if not (seconds > 0 and baseline > 0):
        raise ValueError(f"timings must be positive, got {seconds!r} and {baseline!r}")
    ratio = baseline / seconds
    if abs(ratio - 1) <= SAME:
        return f"about as fast as {other} (within {SAME:.0%})"
    return (
        f"{ratio:.3g}x faster than {other}"
        if ratio > 1
        else f"{1 / ratio:.3g}x slower than {other}"
    )
