"""Each lesson-03 checker passes the reference answer, fails a known-wrong one, spots a stub.

03.1, 03.2 and 03.3 are verified against course_utils.async_model (a simulated device, a
simulated training step and a recording stand-in for torch.cuda); test_async_model.py tests that
model, and the gpu-marked test below runs the reference answers on a real GPU.
"""

import re
import time

import pytest
import torch

from course_utils import timing
from course_utils.grading import FAILED, NOT_ATTEMPTED, PASSED, run_check


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: ...")


def time_call(fn, synchronize, clock=time.perf_counter):
    synchronize()
    start = clock()
    fn()
    synchronize()
    return clock() - start


def time_call_naive(fn, synchronize, clock=time.perf_counter):
    start = clock()
    fn()
    return clock() - start


def time_call_no_initial_sync(fn, synchronize, clock=time.perf_counter):
    start = clock()
    fn()
    synchronize()
    return clock() - start


def side_stream_sum(A, s, cuda=torch.cuda):
    s.wait_stream(cuda.current_stream())
    with cuda.stream(s):
        B = torch.sum(A)
    A.record_stream(s)
    cuda.current_stream().wait_stream(s)
    return B


def side_stream_sum_racing(A, s, cuda=torch.cuda):  # the CUDA notes' incorrect example
    with cuda.stream(s):
        B = torch.sum(A)
    return B


def side_stream_sum_no_record(A, s, cuda=torch.cuda):
    s.wait_stream(cuda.current_stream())
    with cuda.stream(s):
        B = torch.sum(A)
    cuda.current_stream().wait_stream(s)
    return B


def side_stream_sum_synchronize(A, s, cuda=torch.cuda):  # correct, if slower
    cuda.synchronize()
    with cuda.stream(s):
        B = torch.sum(A)
    cuda.synchronize()
    return B


def images_per_second(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
    for batch in batches[:warmup]:
        train_step(batch)
    synchronize()
    start = clock()
    for batch in batches[warmup:]:
        train_step(batch)
    synchronize()
    return sum(len(b) for b in batches[warmup:]) / (clock() - start)


def as_found(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
    start = clock()
    for batch in batches:
        train_step(batch)
    return sum(len(b) for b in batches) / (clock() - start)


def _variant(*, warmup_sync=True, per_step_sync=False, end_sync=True, count=None, offset=0):
    """images_per_second with one known mistake; `count` replaces the image count."""

    def answer(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
        for batch in batches[: warmup + offset]:
            train_step(batch)
        if warmup_sync:
            synchronize()
        start = clock()
        for batch in batches[warmup + offset :]:
            train_step(batch)
            if per_step_sync:
                synchronize()
        if end_sync:
            synchronize()
        images = count(batches, warmup) if count else sum(len(b) for b in batches[warmup:])
        return images / (clock() - start)

    return answer


def uses_perf_counter(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
    for batch in batches[:warmup]:
        train_step(batch)
    synchronize()
    start = time.perf_counter()  # not the clock it was given
    for batch in batches[warmup:]:
        train_step(batch)
    synchronize()
    return sum(len(b) for b in batches[warmup:]) / (time.perf_counter() - start)


def skips_the_last_batch(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
    return images_per_second(train_step, batches[:-1], synchronize, clock, warmup)


def top_operator(prof):
    return max(prof.key_averages(), key=lambda e: e.self_cpu_time_total).key


def top_operator_inclusive(prof):
    return max(prof.key_averages(), key=lambda e: e.cpu_time_total).key


@pytest.mark.parametrize(
    ("exercise_id", "answer"),
    [
        ("03.1", time_call),
        ("03.2", side_stream_sum),
        ("03.2", side_stream_sum_synchronize),
        ("03.3", images_per_second),
        ("03.3", timing.images_per_second),
        ("03.4", top_operator),
    ],
)
def test_reference_answers_pass(exercise_id, answer):
    result = run_check(exercise_id, answer)
    assert result.verdict == PASSED, result.message


@pytest.mark.parametrize(
    ("exercise_id", "answer", "message"),
    [
        ("03.1", time_call_naive, r"expected about 0.25 s .* the clock stopped at the launch"),
        ("03.1", time_call_no_initial_sync, r"got 1.25 s: earlier queued work was counted"),
        ("03.2", side_stream_sum_racing, r"expected no race, got the side stream may read A bef"),
        ("03.2", side_stream_sum_no_record, r"got A may be freed.*call A.record_stream\(s\)"),
        (
            "03.3",
            as_found,
            r"device-bound .*: expected 3,897.2 images/s, got 1,342.8: 0 steps ran before",
        ),
        ("03.3", _variant(offset=1), r"3 steps ran before the clock started: run exactly the fi"),
        ("03.3", _variant(warmup_sync=False), r"warm-up steps' queued device work was counted"),
        (
            "03.3",
            _variant(per_step_sync=True),
            r"got 3,165.0: synchronize\(\) inside the timed loop",
        ),
        ("03.3", _variant(end_sync=False), r"clock stopped when the last step was queued"),
        (
            "03.3",
            _variant(count=lambda batches, warmup: sum(len(b) for b in batches)),
            r"the warm-up batches' images were counted too",
        ),
        (
            "03.3",
            _variant(count=lambda batches, warmup: len(batches[0]) * (len(batches) - warmup)),
            r"640 images over the timed interval, but the timed batches hold 608",
        ),
        ("03.3", uses_perf_counter, r"expected 3,897.2 images/s, got .*: the clock was never read"),
        ("03.3", skips_the_last_batch, r"train_step ran 11 times for 12 batches"),
        ("03.4", top_operator_inclusive, r"expected 'aten::\w+', got 'aten::matmul'"),
    ],
)
def test_wrong_answers_fail_with_a_useful_message(exercise_id, answer, message):
    result = run_check(exercise_id, answer)
    assert result.verdict == FAILED
    assert re.search(message, result.message), result.message


@pytest.mark.parametrize("exercise_id", ["03.1", "03.2", "03.3", "03.4"])
def test_stub_is_not_attempted(exercise_id):
    assert run_check(exercise_id, stub).verdict == NOT_ATTEMPTED


@pytest.mark.gpu
def test_reference_answers_on_a_real_gpu():
    a = torch.randn(2048, 2048, device="cuda")
    seconds = time_call(lambda: a @ a, torch.cuda.synchronize)
    assert seconds > 0
    A = torch.empty(1000, 1000, device="cuda").normal_(0.0, 1.0)
    B = side_stream_sum(A, torch.cuda.Stream())
    assert torch.allclose(B, A.sum())
    w = torch.randn(1024, 1024, device="cuda")
    batches = [torch.randn(256, 1024, device="cuda") for _ in range(6)]
    rate = images_per_second(lambda b: (b @ w).relu_(), batches, torch.cuda.synchronize)
    assert rate == pytest.approx(
        timing.images_per_second(lambda b: (b @ w).relu_(), batches, torch.cuda.synchronize),
        rel=0.5,
    )


# ---- held-out cases ------------------------------------------------------------------------


def test_03_1_held_out_cases_fail_the_visible_time_typed_in(held_out_catches):
    def typed_in(fn, synchronize, clock=time.perf_counter):
        fn()
        return 0.25 + 10e-6  # the visible call's work and launch overhead

    failure = held_out_catches("03.1", time_call, typed_in)
    assert re.fullmatch(r"a call of [\d.]+ s behind [\d.]+ s queued: expected about [\d.]+ s, "
                        r"got 0\.25001", failure), failure  # fmt: skip
