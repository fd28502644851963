"""Each lesson-03 checker passes the reference answer, fails a known-wrong one, spots a stub.

03.1 and 03.2 are verified against course_utils.async_model (a simulated device and a recording
stand-in for torch.cuda); test_async_model.py tests that model, and the gpu-marked test below
runs the reference answers on a real GPU.
"""

import re
import time

import pytest
import torch

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


def allocator_report(stats):
    allocated = stats["allocated_bytes.all.current"]
    return {
        "in_tensors": allocated,
        "cached_free": stats["reserved_bytes.all.current"] - allocated,
        "peak_in_tensors": stats["allocated_bytes.all.peak"],
    }


def allocator_report_reserved_peak(stats):
    return {**allocator_report(stats), "peak_in_tensors": stats["reserved_bytes.all.peak"]}


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
        ("03.3", allocator_report),
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
        ("03.3", allocator_report_reserved_peak, r"expected peak_in_tensors = 608 MiB, got"),
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
    stats = allocator_report(torch.cuda.memory_stats())
    assert stats["in_tensors"] == torch.cuda.memory_allocated()
