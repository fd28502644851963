"""course_utils.paired: the one rule that compares two timings, on injected measurements."""

import itertools
import random

import pytest

from course_utils import paired

NOISE = 0.2  # each measurement strays by up to 20% of its true value, uniformly, independently


def _machine(gain: float, seed: int, outlier_at: int | None = None, outlier: float = 5.0):
    """(candidate, baseline, clock): a noisy machine where the candidate is truly `gain` faster
    (rates, images/s), each measurement off by up to NOISE; `outlier_at`: that measurement of
    the candidate (1-based) is `outlier` times slower, a burst of other work."""
    rng, calls, now = random.Random(seed), itertools.count(1), itertools.count()

    def candidate():
        rate = 100.0 * (1 + gain) * rng.uniform(1 - NOISE, 1 + NOISE)
        return rate / outlier if next(calls) == outlier_at else rate

    def baseline():
        return 100.0 * rng.uniform(1 - NOISE, 1 + NOISE)

    return candidate, baseline, lambda: float(next(now))  # one "second" per clock reading


def _verdicts(gain, seeds=range(40), **kwargs):
    results = []
    for seed in seeds:
        candidate, baseline, clock = _machine(gain, seed, **kwargs)
        results.append(paired.compare(candidate, baseline, max_pairs=1000, budget=1e9, clock=clock))
    return results


def test_a_real_10_percent_gain_under_20_percent_noise_is_faster():
    verdicts = _verdicts(0.10)
    assert [v.verdict for v in verdicts] == ["faster"] * len(verdicts)
    assert all(v.low > 1 and v.high > 1.05 for v in verdicts)
    assert all(1.03 < v.ratio < 1.25 for v in verdicts), [v.ratio for v in verdicts]


def test_no_change_under_the_same_noise_is_no_difference():
    """At 99% per look, with a look after every pair, a 0% change is called faster or slower in
    a few comparisons out of a hundred (the module's docstring): 40 seeds allow three."""
    verdicts = [v.verdict for v in _verdicts(0.0)]
    assert verdicts.count("no difference") >= 37, verdicts
    assert "undecided" not in verdicts


@pytest.mark.parametrize(("gain", "want"), [(0.10, "faster"), (0.0, "no difference")])
@pytest.mark.parametrize("outlier", [5.0, 0.2])  # one measurement 5x slower, or 5x faster
def test_a_single_outlier_changes_neither_verdict(gain, want, outlier):
    clean = [v.verdict for v in _verdicts(gain)]
    spoiled = [v.verdict for v in _verdicts(gain, outlier_at=3, outlier=outlier)]
    assert clean.count(want) - spoiled.count(want) <= 1, (clean, spoiled)
    assert spoiled.count(want) >= (40 if want == "faster" else 37)


def test_one_outlier_moves_each_end_of_the_interval_by_at_most_one_rank():
    ratios = [1.00 + 0.01 * i for i in range(12)]  # 1.00 .. 1.11: at 99%, k = 2 from 12 on
    low, high = paired.median_interval(ratios)
    assert (low, high) == (1.01, 1.10)
    for wild in (100.0, 0.001):
        spoiled = [wild, *ratios[1:]]
        s_low, s_high = paired.median_interval(spoiled)
        ordered = sorted(ratios)
        assert ordered[0] <= s_low <= ordered[2] and ordered[-3] <= s_high <= ordered[-1]
    assert paired.decide([10.0, *ratios[1:]]).verdict == "faster"  # 1.01.. and a wild 10x
    assert paired.decide([0.01, *ratios[1:]]).verdict == "faster"  # a wild 0.01x cannot undo it


def test_faster_in_every_pair_decides_at_the_fewest_pairs_with_an_interval():
    assert paired.interval_rank(7) is None and paired.interval_rank(8) == 1
    assert paired.interval_rank(6, confidence=0.95) == 1 and paired.interval_rank(11) == 1
    assert paired.interval_rank(12) == 2
    v = paired.decide([1.03, 1.2, 1.01, 1.07, 1.1, 1.02, 1.3, 1.04])
    assert (v.verdict, v.low, v.high, v.pairs) == ("faster", 1.01, 1.3, 8)
    assert paired.decide([1 / r for r in v.ratios]).verdict == "slower"
    assert paired.decide(v.ratios[:7]).words == "undecided after 7 pairs"


def test_no_difference_needs_an_interval_within_the_smallest_gain_worth_keeping():
    near = [0.99, 1.01, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99]
    assert paired.decide(near).verdict == "no difference"
    wide = [0.9, 1.1, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99]  # holds 1, but also +10%: undecided
    assert paired.decide(wide).verdict == "undecided"
    assert paired.decide(wide, min_gain=0.15).verdict == "no difference"


def test_compare_alternates_which_goes_first_and_stops_when_decided():
    order = []

    def candidate():
        order.append("c")
        return 2.0  # seconds: the candidate is slower

    def baseline():
        order.append("b")
        return 1.0

    v = paired.compare(candidate, baseline, higher_is_faster=False)
    assert order[:4] == ["c", "b", "b", "c"] and v.pairs == 8 and len(order) == 16
    assert (v.verdict, v.ratio) == ("slower", 0.5)
    assert (v.candidate, v.baseline) == ((2.0,) * 8, (1.0,) * 8)
    assert str(v) == "0.50x (99% interval 0.50-0.50x, 8 pairs): slower"


def test_compare_stops_at_its_budget_and_says_undecided_after_n_pairs():
    candidate, baseline, clock = _machine(0.03, seed=1)  # 3%: neither worth keeping nor none
    v = paired.compare(candidate, baseline, budget=30, clock=clock)
    # the clock advances a "second" per reading: one at the start, one after each pair
    assert v.verdict == "undecided" and v.pairs == 30
    assert v.words == "undecided after 30 pairs" and "undecided after 30 pairs" in str(v)
    v = paired.compare(candidate, baseline, max_pairs=5, min_pairs=5, budget=1e9, clock=clock)
    assert v.pairs == 5 and v.interval == "none yet"


def test_the_budget_never_stops_before_the_first_interval():
    """Slow measurements, a small budget: a candidate faster in every pair is still found
    faster, at the 8 pairs a 99% interval needs; with min_pairs=2, undecided."""
    slow_clock = itertools.count(0, 10.0)  # ten "seconds" per reading
    v = paired.compare(lambda: 2.0, lambda: 1.0, budget=1, clock=lambda: next(slow_clock))
    assert (v.verdict, v.pairs) == ("faster", 8)
    v = paired.compare(
        lambda: 2.0, lambda: 1.0, budget=1, min_pairs=2, clock=lambda: next(slow_clock)
    )
    assert v.words == "undecided after 2 pairs"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: paired.decide([1.0, -1.0]), "positive and finite"),
        (lambda: paired.decide([1.0], min_gain=0), "min_gain=0"),
        (lambda: paired.interval_rank(10, confidence=1.0), "confidence=1.0"),
        (lambda: paired.compare(lambda: 1.0, lambda: 0.0), "baseline's measurement"),
        (lambda: paired.compare(lambda: 1.0, lambda: 1.0, max_pairs=0), "max_pairs=0"),
        (lambda: paired.compare(lambda: 1.0, lambda: 1.0, max_pairs=4, min_pairs=5), "min_pairs=5"),
    ],
)
def test_refuses_what_it_cannot_compare(call, message):
    with pytest.raises(ValueError, match=message):
        call()
