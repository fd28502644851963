"""Lesson 05 checkers: pass on the reference, fail with a useful message on a known-wrong answer,
and a stub is not attempted. 05.1's real runs (torchrun) are in tests/integration."""

from course_utils.grading import NOT_ATTEMPTED, run_check


def _stub(*args):
    raise NotImplementedError("Exercise 05.k")


def train_ddp_stub(model, dataset, batch_size, lr, steps):
    # Your code here, then run the check cell below.
    raise NotImplementedError("Exercise 05.1: make a training function data-parallel")


def test_05_1_stub_is_not_attempted_without_starting_ranks():
    assert run_check("05.1", train_ddp_stub).verdict == NOT_ATTEMPTED
    assert run_check("05.1", 3).message == "expected a function, got int"


def rank_plan(ranks_per_node, gpus_per_node):
    backend = "nccl" if gpus_per_node >= ranks_per_node else "gloo"
    if gpus_per_node == 0:
        return [(backend, "cpu")] * ranks_per_node
    return [(backend, f"cuda:{r % gpus_per_node}") for r in range(ranks_per_node)]


def test_05_2_rank_plan():
    assert run_check("05.2", rank_plan).passed

    def always_nccl(ranks, gpus):
        return [("nccl", d) for _, d in rank_plan(ranks, gpus)]

    wrong = run_check("05.2", always_nccl)
    assert wrong.verdict == "failed" and "Duplicate GPU detected" in wrong.message
    assert "rank_plan(ranks_per_node=2, gpus_per_node=1)" in wrong.message

    def all_on_gpu0(ranks, gpus):
        return [(b, "cuda:0" if gpus else "cpu") for b, _ in rank_plan(ranks, gpus)]

    crowded = run_check("05.2", all_on_gpu0)
    assert crowded.verdict == "failed" and "rank_plan(ranks_per_node=4, gpus_per_node=4)" in (
        crowded.message
    )
    assert run_check("05.2", _stub).verdict == NOT_ATTEMPTED


HEADER = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=12
#SBATCH --mem=480G
#SBATCH --time=02:00:00
#SBATCH --signal=B:USR1@300
"""


def test_05_3_ddp_header():
    assert run_check("05.3", lambda: HEADER).passed
    one_cpu = run_check("05.3", lambda: HEADER.replace("--cpus-per-task=12", "-c 1"))
    assert "expected --cpus-per-task=12" in one_cpu.message and "got --cpus-per-task=1" in (
        one_cpu.message
    )
    one_task = run_check("05.3", lambda: HEADER.replace("--ntasks-per-node=4", "--ntasks=2"))
    assert "one task per GPU" in one_task.message and "got 1 tasks per node" in one_task.message
    no_signal = run_check("05.3", lambda: HEADER.replace("#SBATCH --signal=B:USR1@300\n", ""))
    assert "got no --signal" in no_signal.message
    unreadable = run_check("05.3", lambda: HEADER + "#SBATCH --time=two hours\n")
    assert "sbatch could not read it" in unreadable.message
    assert run_check("05.3", _stub).verdict == NOT_ATTEMPTED


# ---- held-out cases ------------------------------------------------------------------------


def test_05_2_held_out_cases_fail_a_table_of_the_visible_answers():
    from course_utils.grading import held_out_cases
    from course_utils.grading.exercises import run_held_out

    visible = {(r, g): rank_plan(r, g) for r, g in [(4, 4), (2, 1), (4, 2), (2, 0), (1, 1), (8, 8)]}

    def table(ranks, gpus):  # right on every visible case, and only there
        return visible.get((ranks, gpus), [("gloo", "cpu")] * ranks)

    assert run_check("05.2", table).passed
    assert held_out_cases("05.2") == 4
    for seed in range(5):
        assert run_held_out("05.2", seed, rank_plan).passed == 4
    caught = [run_held_out("05.2", seed, table) for seed in range(5)]
    assert all(r.passed < r.cases for r in caught), caught
    assert "rank_plan(ranks_per_node=" in caught[0].failures[0]
