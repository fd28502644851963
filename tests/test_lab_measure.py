"""lab_measure: the pure parts of what every rank of lesson 10's job measures (the collectives
run in tests/integration/test_lab_local.py)."""

import pytest

from course_utils.lab import measure


def test_communication_share_of_a_step():
    assert measure.communication_share(0.10, 0.075) == pytest.approx(0.25)
    assert measure.communication_share(0.10, 0.12) == 0.0  # noise: syncing cost nothing
    with pytest.raises(ValueError, match="must be > 0 seconds"):
        measure.communication_share(0.0, 0.1)


def test_timed_steps_leave_the_warm_up_out():
    calls = []

    def step(inputs, targets):
        calls.append(inputs)
        return 2.0 - 0.1 * len(calls)

    seconds, losses = measure.timed_steps(step, [(i, i) for i in range(5)], "cpu", warmup=2)
    assert calls == [0, 1, 2, 3, 4] and len(seconds) == 3 and all(s >= 0 for s in seconds)
    assert losses == pytest.approx([1.9, 1.8, 1.7, 1.6, 1.5])


def test_interface_addresses_name_the_loopback():
    assert measure.interface_addresses().get("127.0.0.1") is not None


def test_threads_per_rank_share_the_cpus_that_ranks_share():
    bound = [{0, 1, 2, 3}, {4, 5, 6, 7}]  # core binding: each rank its own CPUs
    assert measure.threads_per_rank(4, {0, 1, 2, 3}, bound) == 4
    assert measure.threads_per_rank(4, {0, 1}, [{0, 1}] * 4) == 1  # 4 ranks, 2 shared CPUs
    assert measure.threads_per_rank(8, set(range(8)), [set(range(8))] * 2) == 4  # torchrun
    assert measure.threads_per_rank(4, {0, 1}, [{0, 1}]) == 2  # alone, on fewer CPUs
    assert measure.threads_per_rank(1, set(range(16)), [set(range(16))]) == 1
