import os

import pytest
import torch

from course_utils import hpc


def test_slurm_cpus_per_task_wins():
    assert hpc.allocated_cpus({"SLURM_CPUS_PER_TASK": "7"}) == 7


def test_falls_back_to_affinity():
    assert hpc.allocated_cpus({}) == len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("variable", "affinity", "cpus"),
    [("4", 2, 2), ("4", 64, 4), (None, 64, 64), ("4", 4, 4)],
    ids=["bound-narrower", "unbound-node", "no-variable", "agree"],
)
def test_this_process_takes_the_narrower_of_variable_and_affinity(
    monkeypatch, variable, affinity, cpus
):
    # injected: the variable of this process's job, and the CPUs its affinity mask allows
    if variable is None:
        monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    else:
        monkeypatch.setenv("SLURM_CPUS_PER_TASK", variable)
    monkeypatch.setattr(hpc, "affinity_cpus", lambda: affinity)
    assert hpc.allocated_cpus() == cpus


@pytest.mark.parametrize("raw, rule", [("four", "not an integer"), ("0", "at least 1")])
def test_bad_slurm_value_names_variable(raw, rule):
    with pytest.raises(ValueError, match=f"SLURM_CPUS_PER_TASK=.*{rule}"):
        hpc.allocated_cpus({"SLURM_CPUS_PER_TASK": raw})


def test_configure_threads_sets_and_returns():
    before = torch.get_num_threads()
    try:
        assert hpc.configure_threads(1) == 1
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_configure_threads_rejects_zero():
    with pytest.raises(ValueError, match="thread count 0 must be a positive integer"):
        hpc.configure_threads(0)


def test_in_slurm_job():
    assert hpc.in_slurm_job({"SLURM_JOB_ID": "12"}) and not hpc.in_slurm_job({})


def test_configure_interop_threads_rejects_bad_counts():
    with pytest.raises(ValueError, match="inter-op thread count 0 must be a positive integer"):
        hpc.configure_interop_threads(0)
