"""Exercise 02.3 checked for real: the learner's loaders start DataLoader worker processes, which
the fast lane refuses (tests/grading/checks/test_lesson02.py judges canned logs and answers that
start none)."""

import time
from functools import partial

import pytest

from course_utils import cpu_sweep, data, hpc
from course_utils.grading import run_check


def loader_rates(dataset, batch_size, *, warm_up=False):
    rates = {}
    for count in cpu_sweep.counts(hpc.allocated_cpus(), start=0):
        loader = data.make_loader(dataset, batch_size=batch_size, num_workers=count)
        if warm_up:  # a pass before the timed one: the data set's log sees both
            sum(len(x) for x, _ in loader)
        start = time.perf_counter()
        images = sum(len(x) for x, _ in loader)
        rates[count] = images / (time.perf_counter() - start)
    return rates


def test_loader_rates_measured_with_workers_pass():
    done = run_check("02.3", loader_rates)
    assert done.passed, done.message
    assert done.message.startswith("every count of cpu_sweep.counts measured")
    warmed = run_check("02.3", partial(loader_rates, warm_up=True))
    assert warmed.passed, warmed.message


@pytest.mark.filterwarnings("ignore:This DataLoader will create 4 worker processes:UserWarning")
def test_loader_rates_on_an_allocation_of_four_pass_and_its_end_points_fail():
    """On 4 CPUs the counts are 0, 1, 2 and 4; the end points alone are not enough."""
    done = run_check("02.3", loader_rates, cpus=4)
    assert done.passed, done.message

    def ends(dataset, batch_size):
        return data.loader_rates(dataset, batch_size, workers=[0, 4])

    wrong = run_check("02.3", ends, cpus=4)
    assert wrong.message.endswith("got [0, 4], without [1, 2]")


def test_loader_rates_of_the_lessons_own_data_set_are_not_attempted():
    """Measured in the kernel on another data set: the one the check gave was never read."""
    other = data.SyntheticCIFAR10(size=256, seed=1)

    def elsewhere(dataset, batch_size):
        return data.loader_rates(other, batch_size, workers=cpu_sweep.counts(2, start=0))

    done = run_check("02.3", elsewhere, cpus=2)
    assert done.verdict == "not attempted yet"
    assert done.message.startswith("run the loaders first")
