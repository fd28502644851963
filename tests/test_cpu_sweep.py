"""cpu_sweep: the counts lesson 02's sweeps measure, and the words its inter-op cell prints."""

import pytest

from course_utils import cpu_sweep


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
    ("seconds", "baseline", "words"),
    [
        (8.5, 16.6, "1.95x faster than on 1"),
        (15.5, 16.6, "about as fast as on 1 (within 10%)"),  # 1.07x: no difference worth a word
        (52.2, 33.0, "1.58x slower than on 1"),
        (1.0, 140.5, "140x faster than on 1"),
    ],
)
def test_compared_says_what_two_timings_show(seconds, baseline, words):
    assert cpu_sweep.compared(seconds, baseline, "on 1") == words


def test_compared_refuses_a_timing_that_is_not_positive():
    with pytest.raises(ValueError, match="timings must be positive"):
        cpu_sweep.compared(0.0, 1.0, "on 1")
