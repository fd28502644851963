"""Lessons 01 and 02's measurements checked for real: the learner's timings (01.1's view and
copy, 01.2's broadcasting and loop, 02.2's step at each thread count) held to the judge's own
timing of the same work. No process starts here, but each verdict rests on two timings taken on
one machine at different moments, which a busy machine sets far apart (seen with two busy loops
beside the run: the judge's copy of 3 MB at 800 us beside a learner's 70 us): so these are no
fast tests. tests/grading/checks/test_lesson01.py and test_lesson02.py judge the same rules on
canned records, and the answers that fail before any timing is compared."""

from functools import partial

import torch
from lessons01_02_answers import (
    broadcast_vs_loop,
    flatten,
    standardize,
    thread_rates,
    view_and_copy_costs,
)

from course_utils import hpc
from course_utils.grading import NOT_ATTEMPTED, run_check
from course_utils.grading.checks import slurm_record
from course_utils.grading.exercises import held_out_cases, run_held_out

# ---- 01.1 and 01.2 --------------------------------------------------------------------------


def test_flatten_and_its_measurement():
    done = run_check("01.1", flatten, view_and_copy_costs)
    assert done.passed, done.message
    assert done.message == (
        "the view shares the batch's 3,145,728 bytes; the copy takes as many again"
    )


def test_measurement_that_times_a_view_as_the_copy_fails():
    wrong = run_check("01.1", flatten, partial(view_and_copy_costs, time_copy="v.view(-1)"))
    assert wrong.verdict == "failed"
    assert "copy_time: the time of the copy" in wrong.message and "'v.view(-1)'" in wrong.message


def test_measurement_of_nothing_fails():
    """Timer("pass") where the view should be timed: far from the check's own measurement."""
    wrong = run_check("01.1", flatten, partial(view_and_copy_costs, time_view="pass"))
    assert wrong.verdict == "failed"
    assert "view_time: the time of the view" in wrong.message and "'pass'" in wrong.message


def test_measurement_with_a_typed_figure_fails():
    """The view is timed for real (and held to the judge's own), the copy's time typed in."""

    def typed(images):
        return {**view_and_copy_costs(images), "copy_time": 0.004}

    wrong = run_check("01.1", flatten, typed)
    assert "copy_time: a Measurement of torch.utils.benchmark" in wrong.message


def test_standardize_and_its_measurement():
    done = run_check("01.2", standardize, broadcast_vs_loop)
    assert done.passed, done.message


def test_measurement_of_two_broadcasts_fails():
    same = run_check("01.2", standardize, partial(broadcast_vs_loop, looped=standardize))
    assert same.verdict == "failed"
    # Either reading of loop_time is right: a time nearer the check's own broadcasting than its
    # loop (test above), or, where load slowed the second broadcast past that, one no slower
    # than the first broadcast.
    assert any(
        reason in same.message
        for reason in (
            "loop_time: the time of a loop over the columns",
            "the loop over columns slower than broadcasting",
        )
    ), same.message


# ---- 02.2 ---------------------------------------------------------------------------------


def test_thread_rates():
    done = run_check("02.2", thread_rates)
    assert done.passed, done.message
    assert torch.get_num_threads() == hpc.allocated_cpus()


def test_thread_rates_at_every_count_of_32_cpus_pass():
    """An allocation of 32 injected: the sweep's six counts (their end points alone fail:
    tests/grading/checks/test_lesson02.py)."""
    every = run_check("02.2", thread_rates, cpus=32)
    assert every.passed, every.message


def test_02_2_held_out_case_fails_rates_worked_out_for_256_images():
    def for_256(step, batch_size):
        return thread_rates(step, 256)

    cases = held_out_cases("02.2")
    assert run_check("02.2", for_256).passed, "the wrong answer must pass what is visible"
    for seed in range(2):
        assert run_held_out("02.2", seed, thread_rates).passed == cases, seed
        caught = run_held_out("02.2", seed, for_256)
        assert caught.passed < cases, caught
        assert "a figure the step's own clock does not support" in caught.failures[0]


def test_02_2_held_out_case_runs_here_where_the_job_is_on_the_record():
    """On a cluster the course requires a job for 02.2; its held-out case asks for none (the job
    is the visible case's), so the honest learner's grade holds it."""
    slurm_record.set_course(slurm_record.Course("learner1", "course", required=True))
    try:
        assert run_check("02.2", thread_rates).verdict == NOT_ATTEMPTED  # no job named
        held = run_held_out("02.2", 0, thread_rates)
    finally:
        slurm_record._COURSE.clear()
    assert held.passed == held_out_cases("02.2"), held
