"""Lesson 01 checkers: pass on the reference, fail with a useful message on known-wrong answers."""

from functools import partial

import pytest
import torch
from torch.utils import benchmark

from course_utils import paired
from course_utils.grading import CheckFailed, run_check
from course_utils.grading.checks import lesson01


def flatten(x):
    return x.flatten(1)


def view_and_copy_costs(
    images, *, copy=lambda t: t.clone(), time_copy="v.clone()", time_view="images.flatten(1)"
):
    view = flatten(images)
    names = {"images": images, "v": view}
    timer = partial(benchmark.Timer, globals=names)
    return {
        "view": view,
        "copy": copy(view),
        "view_time": timer(time_view).blocked_autorange(min_run_time=0.05),
        "copy_time": timer(time_copy).blocked_autorange(min_run_time=0.05),
    }


def test_flatten_and_its_measurement():
    done = run_check("01.1", flatten, view_and_copy_costs)
    assert done.passed, done.message
    assert done.message == (
        "the view shares the batch's 3,145,728 bytes; the copy takes as many again"
    )


def test_flatten_that_copies_fails():
    copy = run_check("01.1", lambda x: x.flatten(1).clone(), view_and_copy_costs)
    assert copy.verdict == "failed" and "a copy (different data_ptr)" in copy.message
    wrong_shape = run_check("01.1", lambda x: x.flatten(), view_and_copy_costs)
    assert wrong_shape.message == "expected shape (8, 48), got shape (384,)"


def test_measurement_that_times_a_view_as_the_copy_fails():
    wrong = run_check("01.1", flatten, partial(view_and_copy_costs, time_copy="v.view(-1)"))
    assert wrong.verdict == "failed"
    assert "copy_time: the time of the copy" in wrong.message and "'v.view(-1)'" in wrong.message


def test_measurement_of_nothing_fails():
    """Timer("pass") where the view should be timed: far from the check's own measurement."""
    wrong = run_check("01.1", flatten, partial(view_and_copy_costs, time_view="pass"))
    assert wrong.verdict == "failed"
    assert "view_time: the time of the view" in wrong.message and "'pass'" in wrong.message


def test_measurement_with_typed_figures_or_no_copy_fails():
    def typed(images):
        return {**view_and_copy_costs(images), "copy_time": 0.004}

    wrong = run_check("01.1", flatten, typed)
    assert "copy_time: a Measurement of torch.utils.benchmark" in wrong.message
    shared = run_check("01.1", flatten, partial(view_and_copy_costs, copy=lambda t: t))
    assert "'copy' in memory of its own" in shared.message


def standardize(x):
    return (x - x.mean(0)) / x.std(0, unbiased=False)


def loop(x):
    out = torch.empty_like(x)
    for j in range(x.shape[1]):
        out[:, j] = (x[:, j] - x[:, j].mean()) / x[:, j].std(unbiased=False)
    return out


def broadcast_vs_loop(x, *, fn=standardize, looped=loop):
    names = {"x": x, "fn": fn, "loop": looped}
    timer = partial(benchmark.Timer, globals=names)
    return {
        "result": fn(x),
        "broadcast_time": timer("fn(x)").blocked_autorange(min_run_time=0.05),
        "loop_time": timer("loop(x)").blocked_autorange(min_run_time=0.05),
    }


def test_standardize_and_its_measurement():
    done = run_check("01.2", standardize, broadcast_vs_loop)
    assert done.passed, done.message
    rows = run_check(
        "01.2",
        lambda x: (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True),
        broadcast_vs_loop,
    )
    assert rows.verdict == "failed" and "each column with mean 0 and std 1" in rows.message


def test_measurement_of_two_broadcasts_or_a_wrong_result_fails():
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
    unbiased = run_check(
        "01.2", standardize, partial(broadcast_vs_loop, fn=lambda x: (x - x.mean(0)) / x.std(0))
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
    """Both statements are measured by paired.compare, alternating, the slow one as the
    candidate: their medians are the references a learner's timings are held to."""
    calls = []
    real = lesson01.paired.compare

    def spy(candidate, baseline, **kwargs):
        calls.append(kwargs)
        return real(candidate, baseline, **kwargs)

    monkeypatch.setattr(lesson01.paired, "compare", spy)
    own = lesson01._own_pair(("x + 1", {"x": torch.ones(4)}), ("x.exp()", {"x": torch.ones(10**6)}))
    assert calls == [{"higher_is_faster": False, "budget": lesson01.BUDGET}]
    assert own.candidate_median > own.baseline_median and own.pairs >= 1


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

    import torch

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
