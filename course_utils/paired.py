"""Comparing two timings: paired, alternating measurements, decided by an interval.

Two things timed one after the other on a shared machine differ by their own effect and by
whatever the machine did meanwhile. Timed in pairs, back to back, each pair's ratio cancels what
changed slowly (the load, the clock speed); alternating which of the two goes first cancels what
the order does. The verdict comes from the pairs' ratios (the candidate's speed over the
baseline's: above 1, the candidate is faster), through a confidence interval for their median
made of two of the ratios themselves: the k-th smallest and the k-th largest, with k from the
sign test (of n pairs, each ratio falls on either side of the true median with probability 1/2,
so how many fall below it is Binomial(n, 1/2)). The interval holds whatever the noise's
distribution, and one outlier moves each of its ends by at most one rank: it cannot decide a
verdict, and from 12 pairs on it cannot widen one. The verdict:

- "faster" or "slower": the interval excludes 1;
- "no difference": the interval holds 1 and lies within the smallest gain worth keeping
  (`min_gain`: between 1 / (1 + min_gain) and 1 + min_gain);
- otherwise undecided: `compare` measures another pair, until the interval decides or the
  budget (seconds, pairs) runs out, and then says "undecided after N pairs".

The interval is a 99% one, and not 95%, because `compare` looks at it after every pair and stops
at the first verdict: each look is another chance for noise to exclude 1. Simulated with
measurements that each stray by up to 20% (uniformly), a 0% change came out "faster" or
"slower" in about 7% of comparisons at 99% (about 24% at 95%), and in about 1% when they stray
by 5%; a real 10% gain came out "faster" every time. pyperf's `compare_to` and Google
Benchmark's `compare.py` decide the same question with a significance test (Welch's t-test,
Mann-Whitney U); an interval also says how large the difference is, and when it is narrow
enough to call none.

`decide` is the rule on given ratios (pure); `compare` measures the pairs, calling two
functions and a clock it is given. Taught in lesson 08 (`speed.tune` keeps a step when it is
"faster"); lessons 01 and 02 and the benchmarks compare their timings with it too.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

FASTER, SLOWER, SAME, UNDECIDED = "faster", "slower", "no difference", "undecided"
CONFIDENCE = 0.99  # at 99%, 8 pairs are the fewest with an interval: all 8 on one side is 0.8%
MIN_GAIN = 0.05  # a change smaller than 5% is not worth keeping (nor worth a word)


@functools.lru_cache(maxsize=1024)
def interval_rank(n: int, confidence: float = CONFIDENCE) -> int | None:
    """k: the interval for a median of `n` values runs from the k-th smallest to the k-th
    largest (1-based); the largest k whose coverage, 1 - 2 P(Binomial(n, 1/2) < k), is at least
    `confidence`. None when `n` values are too few for it (below 8 at 99%, 6 at 95%)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} must lie between 0 and 1, e.g. 0.95")
    tail, below, k = (1 - confidence) / 2, 0.0, 0
    while k < n // 2:
        below += math.comb(n, k) / 2**n  # P(Binomial(n, 1/2) == k)
        if below > tail:
            break
        k += 1
    return k or None


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE):
    """(low, high): a `confidence` interval for the median of `values` (order statistics, the
    sign test's interval), or None when there are too few values for one."""
    k = interval_rank(len(values), confidence)
    if k is None:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[-k]


@dataclass(frozen=True)
class Verdict:
    """The outcome of comparing a candidate with a baseline from paired measurements."""

    ratios: tuple[float, ...]  # the candidate's speed over the baseline's, one per pair
    low: float | None  # the interval for their median; None: too few pairs for one
    high: float | None
    verdict: str  # FASTER, SLOWER, SAME or UNDECIDED
    min_gain: float = MIN_GAIN
    confidence: float = CONFIDENCE
    candidate: tuple[float, ...] = ()  # what was measured, in order (rates or seconds)
    baseline: tuple[float, ...] = ()

    @property
    def pairs(self) -> int:
        return len(self.ratios)

    @property
    def ratio(self) -> float:
        """The median of the paired ratios: how many times as fast the candidate is."""
        return statistics.median(self.ratios) if self.ratios else math.nan

    @property
    def candidate_median(self) -> float:
        """The candidate's median measurement (a rate or a time, as measured)."""
        return statistics.median(self.candidate) if self.candidate else math.nan

    @property
    def baseline_median(self) -> float:
        return statistics.median(self.baseline) if self.baseline else math.nan

    @property
    def decided(self) -> bool:
        return self.verdict != UNDECIDED

    @property
    def words(self) -> str:
        """The verdict in words: "faster", "slower", "no difference" or "undecided after 4
        pairs"."""
        if self.decided:
            return self.verdict
        return f"{UNDECIDED} after {self.pairs} pair{'' if self.pairs == 1 else 's'}"

    @property
    def interval(self) -> str:
        """The interval as text: "1.04-1.12x", or "none yet" (too few pairs for one)."""
        if self.low is None:
            return "none yet"
        return f"{self.low:.2f}-{self.high:.2f}x"

    def __str__(self) -> str:
        return (
            f"{self.ratio:.2f}x ({self.confidence:.0%} interval {self.interval}, "
            f"{self.pairs} pairs): {self.words}"
        )


def decide(
    ratios: Sequence[float],
    min_gain: float = MIN_GAIN,
    confidence: float = CONFIDENCE,
    candidate: Sequence[float] = (),
    baseline: Sequence[float] = (),
) -> Verdict:
    """The verdict on paired ratios (the candidate's speed over the baseline's, one per pair):
    FASTER or SLOWER when the interval for their median excludes 1, SAME when it holds 1 and
    lies within (1 / (1 + min_gain), 1 + min_gain), else UNDECIDED."""
    if min_gain <= 0:
        raise ValueError(f"min_gain={min_gain} must be > 0: the smallest gain worth keeping")
    ratios = tuple(float(r) for r in ratios)
    bad = [r for r in ratios if not (r > 0 and math.isfinite(r))]
    if bad:
        raise ValueError(f"ratios must be positive and finite, got {bad[:3]}")
    found = median_interval(ratios, confidence)
    low, high = found or (None, None)
    if found is None:
        verdict = UNDECIDED
    elif low > 1:
        verdict = FASTER
    elif high < 1:
        verdict = SLOWER
    elif high < 1 + min_gain and low > 1 / (1 + min_gain):
        verdict = SAME
    else:
        verdict = UNDECIDED
    return Verdict(
        ratios, low, high, verdict, min_gain, confidence, tuple(candidate), tuple(baseline)
    )


def compare(
    candidate: Callable[[], float],
    baseline: Callable[[], float],
    *,
    higher_is_faster: bool = True,
    min_gain: float = MIN_GAIN,
    confidence: float = CONFIDENCE,
    max_pairs: int = 200,
    budget: float = 30.0,
    min_pairs: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Verdict:
    """Measure `candidate()` and `baseline()` in pairs, back to back, alternating which goes
    first, until the pairs decide (see `decide`) or the budget runs out: `max_pairs` pairs or
    `budget` seconds of `clock`, whichever comes first, but never before `min_pairs` pairs
    (default: the fewest that have an interval, 8 at 99%, so that a candidate faster in every
    pair is found faster however slow each measurement is; `max_pairs` where that is fewer).
    Each call returns one measurement: a rate (`higher_is_faster=True`, images/s) or a time
    (False, seconds). Warm-up belongs before this: every call here counts."""
    if min_pairs is None:  # the fewest with an interval, or all max_pairs where that is fewer
        first = next(n for n in range(1, 64) if interval_rank(n, confidence))
        min_pairs = max(1, min(first, max_pairs))
    if not 1 <= min_pairs <= max_pairs or budget < 0:
        raise ValueError(
            f"max_pairs={max_pairs} must be >= min_pairs={min_pairs} >= 1 and "
            f"budget={budget} s >= 0"
        )
    start, ratios, mine, theirs = clock(), [], [], []
    verdict = decide([], min_gain, confidence)
    while len(ratios) < max_pairs:
        first_candidate = len(ratios) % 2 == 0
        if first_candidate:
            c = candidate()
            b = baseline()
        else:
            b = baseline()
            c = candidate()
        _positive(c, "candidate")
        _positive(b, "baseline")
        mine.append(c)
        theirs.append(b)
        ratios.append(c / b if higher_is_faster else b / c)
        verdict = decide(ratios, min_gain, confidence, mine, theirs)
        spent = clock() - start >= budget and len(ratios) >= min_pairs
        if verdict.decided or spent:
            break
    return verdict


def _positive(value: float, which: str) -> None:
    if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
        raise ValueError(f"the {which}'s measurement must be a positive number, got {value!r}")
