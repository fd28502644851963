"""cpu_sweep: the counts lesson 02's sweeps measure, one measurement on a thread count, and the
words its cells print for a paired comparison."""

import pytest
import torch

from course_utils import cpu_sweep, hpc, paired, timing


@pytest.mark.parametrize(
    ("allocated", "start", "counts"),
    [
        (1, 1, [1]),
        (1, 0, [0, 1]),
        (2, 1, [1, 2]),  # on 2 CPUs: every count, as the lesson measured before
        (2, 0, [0, 1, 2]),
        (6, 1, [1, 2, 4, 6]),
        (32, 1, [1, 2, 4, 8, 16, 32]),
        (48, 0, [0, 1, 2, 4, 8, 16, 32, 48]),
    ],
)
def test_counts_double_up_to_the_allocation_and_end_on_it(allocated, start, counts):
    assert cpu_sweep.counts(allocated, start) == counts


@pytest.mark.parametrize(("allocated", "start"), [(0, 1), (2.0, 1), (True, 1), (4, 2)])
def test_counts_refuse_what_is_no_allocation_or_no_start(allocated, start):
    with pytest.raises(ValueError, match="must be"):
        cpu_sweep.counts(allocated, start)


@pytest.mark.parametrize(
    ("ratios", "words"),
    [
        (
            [1.9, 1.95, 1.8, 2.0, 1.97, 1.85, 1.99, 1.93],
            "1.94x faster than on 1 (99% interval 1.80-2.00x, 8 pairs)",
        ),
        (
            [0.76, 0.8, 0.77, 0.74, 0.79, 0.75, 0.78, 0.77, 0.76],
            "1.3x slower than on 1 (99% interval 1.25-1.35x, 9 pairs)",
        ),
        (
            [1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99],
            "about as fast as on 1 (no difference beyond 5%, 8 pairs)",
        ),
        (
            [1.2, 0.9, 1.1, 1.0, 0.95, 1.15, 1.05, 1.0],
            "undecided after 8 pairs against on 1 (1.02x faster so far)",
        ),
        ([0.5, 0.9, 1.1], "undecided after 3 pairs against on 1 (1.11x slower so far)"),
    ],
)
def test_compared_says_what_the_pairs_show(ratios, words):
    """Ratios as paired.compare makes them from timings: the other's seconds over these."""
    assert cpu_sweep.compared(paired.decide(ratios), "on 1") == words


def test_on_threads_measures_with_its_count_and_sets_the_allocation_back(monkeypatch):
    seen = []

    def fake_time_fn(fn, *args, warmup, min_run_time):
        seen.append((torch.get_num_threads(), warmup))
        return timing.Timing(0.25, 0.0, 1, 1)

    monkeypatch.setattr(cpu_sweep, "time_fn", fake_time_fn)
    allocated = hpc.configure_threads()
    assert cpu_sweep.on_threads(1, print)() == 0.25
    assert seen == [(1, 0)] and torch.get_num_threads() == allocated


def test_on_threads_times_a_real_call():
    assert 0 < cpu_sweep.on_threads(1, torch.ones, 4)() < 1.0


def test_median_rates_keeps_one_slowed_count_out_of_the_sweep():
    """The CI case: one sweep's 1-thread run slowed by the node's other work (3.0x on 2), the
    other sweeps' not."""
    sweeps = [{1: 3700.0, 2: 7000.0}, {1: 2389.0, 2: 7217.0}, {1: 3650.0, 2: 7100.0}]
    assert cpu_sweep.median_rates(sweeps) == {1: 3650.0, 2: 7100.0}
    assert cpu_sweep.median_rates(sweeps[:1]) == sweeps[0]


@pytest.mark.parametrize(
    ("sweeps", "error", "said"),
    [
        ([], ValueError, r"sweeps=\[\]: give at least one sweep"),
        ([{1: 1.0, 2: 2.0}, {1: 1.0}], ValueError, r"one sweep measured counts \[1\], another"),
        ([{1: 1.0}, [1.0]], TypeError, r"\[1.0\] is not a sweep"),
    ],
)
def test_median_rates_refuses_sweeps_that_are_not_alike(sweeps, error, said):
    with pytest.raises(error, match=said):
        cpu_sweep.median_rates(sweeps)
