"""how_many.choose: one decision with the deadline and the efficiency in it (lessons 08, 10)."""

import pytest

from course_utils import how_many

# Measured images/s at 1, 2, 4 and 8 GPUs: 95%, 85% and 60% efficient.
RATES = {1: 1000.0, 2: 1900.0, 4: 3400.0, 8: 4800.0}
WORK = 36_000_000  # images


def test_efficiency_is_rate_over_n_times_one_gpu():
    assert how_many.efficiencies(RATES) == {1: 1.0, 2: 0.95, 4: 0.85, 8: 0.6}


@pytest.mark.parametrize(
    "deadline, gpus, meets",
    [
        (12.0, 1, True),  # one GPU finishes in 10 h: the fewest GPU-hours
        (6.0, 2, True),  # 5.3 h on 2
        (3.0, 4, True),  # 2.9 h on 4
        (2.0, 4, False),  # 8 GPUs would make it (2.1 h, no), and at 60%: the fastest good one
        (None, 4, True),  # no deadline: the most GPUs at 80% or better
    ],
)
def test_the_fewest_gpus_in_time_among_the_efficient_ones(deadline, gpus, meets):
    choice = how_many.choose(RATES, WORK, deadline)
    assert (choice.gpus, choice.meets_deadline) == (gpus, meets)
    assert choice.gpu_hours == pytest.approx(gpus * WORK / RATES[gpus] / 3600)


def test_an_inefficient_count_is_never_chosen_even_when_only_it_is_in_time():
    rates = {1: 1000.0, 2: 1950.0, 8: 4000.0}  # 8 GPUs at 50%
    choice = how_many.choose(rates, 10_000_000, deadline_hours=1.0)
    assert choice.gpus == 2 and not choice.meets_deadline
    assert "no count that keeps 80% efficiency finishes within 1 h" in choice.why
    assert how_many.choose(rates, 10_000_000, 1.0, min_efficiency=0.5).gpus == 8


def test_bad_input_names_the_value_and_the_rule():
    with pytest.raises(ValueError, match="lack a positive rate at 1 GPU"):
        how_many.choose({2: 100.0}, 10)
    with pytest.raises(ValueError, match=r"min_efficiency=1.5 must be in \(0, 1\]"):
        how_many.choose(RATES, 10, min_efficiency=1.5)
    with pytest.raises(ValueError, match="work=0 must be positive"):
        how_many.choose(RATES, 0)
