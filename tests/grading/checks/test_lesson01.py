"""Lesson 01 checkers: pass on the reference, fail with a useful message on known-wrong answers.

01.1 and 01.2 hold the learner's timings to the judge's own timing of the same work: their rules
are judged here on canned records and on answers that fail before any timing is compared; the
runs whose verdict rests on the two timings are in
tests/integration/test_checks_lessons01_02_timed.py (a busy machine can set them far apart)."""

from functools import partial

import pytest
import torch
from lessons01_02_answers import broadcast_vs_loop, flatten, standardize, view_and_copy_costs

from course_utils import paired
from course_utils.grading import CheckFailed, run_check
from course_utils.grading.checks import lesson01

QUICK = 0.005  # seconds of each of the learner's timings where the verdict does not rest on them


def test_flatten_that_copies_fails():
    costs = partial(view_and_copy_costs, min_run_time=QUICK)
    copy = run_check("01.1", lambda x: x.flatten(1).clone(), costs)
    assert copy.verdict == "failed" and "a copy (different data_ptr)" in copy.message
    wrong_shape = run_check("01.1", lambda x: x.flatten(), costs)
    assert wrong_shape.message == "expected shape (8, 48), got shape (384,)"


def test_measurement_without_a_copy_fails():
    costs = partial(view_and_copy_costs, copy=lambda t: t, min_run_time=QUICK)
    shared = run_check("01.1", flatten, costs)
    assert "'copy' in memory of its own" in shared.message


def test_standardize_over_rows_or_a_wrong_result_fails():
    quick = partial(broadcast_vs_loop, min_run_time=QUICK)
    rows = run_check(
        "01.2", lambda x: (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True), quick
    )
    assert rows.verdict == "failed" and "each column with mean 0 and std 1" in rows.message
    unbiased = run_check(
        "01.2", standardize, partial(quick, fn=lambda x: (x - x.mean(0)) / x.std(0))
    )
    assert "'result': x standardized by column" in unbiased.message


@pytest.mark.parametrize(
    "median, passes",
    [
        (2.5e-2, True),  # the loop, a little faster than the check's own run of it
        (1.2e-2, True),  # the loop on a quieter moment: still nearer the loop
        (4.0e-3, False),  # within SAME_SIZE of the loop, but a broadcast slowed by a busy core
        (3.0e-3, False),  # a broadcast
    ],
)
def test_a_timing_must_be_nearer_the_operation_it_names_than_the_other(median, passes):
    """The rule that makes one operation timed in place of the other fail under load: the loop
    (3e-2 s here) and broadcasting (3e-3 s) differ tenfold, as on CI's machine, so SAME_SIZE
    alone let a broadcast slowed by a third pass as the loop."""
    records = {"loop_time": {"median": median, "stmt": "loop(x)"}}
    own, other = 3.0e-2, ("broadcasting", 3.0e-3)
    if passes:
        assert lesson01._timed(records, "loop_time", "a loop", own, "w", other) == median
    else:
        with pytest.raises(CheckFailed, match=r"^w: expected loop_time: the time of a loop, about"):
            lesson01._timed(records, "loop_time", "a loop", own, "w", other)


@pytest.mark.parametrize(
    ("slow", "passes"),
    [(4.0e-2, True), (5.0e-3, True), (3.5e-3, False), (1.5e-3, False)],
)
def test_the_learners_two_timings_must_differ_as_the_checks_pairs_do(slow, passes):
    """The check's own pairs: the loop 40 times broadcasting's 1 ms (ratios 1/45 to 1/35).
    The learner's loop must take at least 40 / SAME_SIZE = 4 times their broadcasting."""
    own = paired.decide([1 / r for r in (35, 38, 39, 40, 40, 41, 42, 44, 45)])
    assert own.verdict == "slower" and 1 / own.ratio == pytest.approx(40)
    if passes:
        lesson01._slower(1e-3, slow, own, "w", "the loop slower")
    else:
        with pytest.raises(CheckFailed, match=r"^w: expected the loop slower: at least 4x \(the"):
            lesson01._slower(1e-3, slow, own, "w", "the loop slower")


def test_the_checks_own_timings_are_paired(monkeypatch):
    """Both statements timed by paired.compare, alternating, the slow one as the candidate (the
    machine's answers injected: 1 us and 100 us): their medians are the references a learner's
    timings are held to."""
    timed = []

    class FakeTimer:
        def __init__(self, stmt, globals):
            self.stmt = stmt

        def blocked_autorange(self, min_run_time):
            timed.append(self.stmt)
            return type("M", (), {"median": {"fast()": 1e-6, "slow()": 1e-4}[self.stmt]})

    monkeypatch.setattr(lesson01.benchmark, "Timer", FakeTimer)
    own = lesson01._own_pair(("fast()", {}), ("slow()", {}))
    assert timed[:4] == ["slow()", "fast()", "fast()", "slow()"] and own.pairs == 8
    assert (own.baseline_median, own.candidate_median, own.verdict) == (1e-6, 1e-4, "slower")


def test_to_numpy():
    assert run_check("01.3", lambda t: t.detach().cpu().numpy()).passed
    no_detach = run_check("01.3", lambda t: t.numpy())
    assert no_detach.verdict == "failed" and "RuntimeError" in no_detach.message
    copies = run_check("01.3", lambda t: t.detach().clone().numpy())
    assert "sharing memory" in copies.message


def test_to_numpy_that_fails_on_a_gpu_tensor_fails():
    """t.detach().numpy() works on the CPU and raises on a GPU tensor: the check's tensor that
    behaves as a GPU tensor does shows it on the CPU."""
    wrong = run_check("01.3", lambda t: t.detach().numpy())
    assert wrong.verdict == "failed" and "a tensor on cuda:0" in wrong.message
    assert "TypeError: can't convert cuda:0 device type tensor to numpy" in wrong.message
    assert run_check("01.3", lambda t: t.numpy(force=True)).passed


def test_gradient():
    def reference(x):
        x = x.clone().requires_grad_()
        (x**3 + 2 * x).sum().backward()
        return x.grad

    assert run_check("01.4", reference).passed
    wrong = run_check("01.4", lambda x: 3 * x**2)
    assert wrong.message.startswith("gradient of sum(x**3 + 2x): expected [5.0, 14.0, 29.0]")
    assert run_check("01.4", lambda x: (_ for _ in ()).throw(NotImplementedError)).verdict == (
        "not attempted yet"
    )


# ---- held-out cases ------------------------------------------------------------------------


def test_01_4_held_out_cases_fail_the_visible_gradient_typed_in(held_out_catches):

    def reference(x):
        x = x.clone().requires_grad_()
        (x**3 + 2 * x).sum().backward()
        return x.grad

    def typed_in(x):
        return torch.tensor([5.0, 14.0, 29.0])

    failure = held_out_catches("01.4", reference, typed_in)
    assert (
        failure.startswith("gradient of sum(x**3 + 2x) at x=[")
        and "got [5.0, 14.0, 29.0]" in failure
    )


def test_01_1_held_out_case_fails_a_batch_kept_from_the_visible_case():
    from course_utils.grading.exercises import run_held_out
    from course_utils.grading.probes.lesson01 import batch_of

    kept = batch_of((8, 3, 4, 4), 0).reshape(8, -1)  # the visible case's flattened batch

    def costs(images):  # not asked again: the timings are the visible case's to check
        raise AssertionError("the held-out case times nothing")

    for seed in range(3):
        assert run_held_out("01.1", seed, lambda x: x.flatten(1), costs).passed == 1
        caught = run_held_out("01.1", seed, lambda x: kept.clone(), costs)
        assert (
            caught.passed == 0
            and "batch_flatten: expected the batch of shape" in caught.failures[0]
        )
