"""Lesson 08 checkers: pass on the reference, fail with a useful message on known-wrong answers."""

import time

import torch
from torch import nn

from course_utils import speed
from course_utils.grading import run_check


def _stub(*args):
    raise NotImplementedError


def test_time_loader():
    assert run_check("08.1", speed.time_loader).passed

    def fixed_batch_size(loader, batches):  # assumes every batch is full
        start = time.perf_counter()
        for i, _ in enumerate(loader):
            if i + 1 == batches:
                break
        return 16 * batches / (time.perf_counter() - start)  # 64 images counted, 22 came

    wrong = run_check("08.1", fixed_batch_size)
    assert wrong.verdict == "failed" and "about 275 images/s" in wrong.message

    def whole_epoch(loader, batches):
        return speed.time_loader(loader, len(loader))

    assert run_check("08.1", whole_epoch).message == (
        "expected exactly 4 batches taken from the loader, got 6"
    )
    assert run_check("08.1", _stub).verdict == "not attempted yet"


def _bottleneck(loader_rate, compute_rate, measured_rate):
    limit = "loader" if loader_rate < compute_rate else "compute"
    return limit, min(loader_rate, compute_rate) / measured_rate


def test_bottleneck():
    assert run_check("08.2", _bottleneck).passed

    def faster_part(loader_rate, compute_rate, measured_rate):  # names the faster part
        limit = "loader" if loader_rate > compute_rate else "compute"
        return limit, min(loader_rate, compute_rate) / measured_rate

    wrong = run_check("08.2", faster_part)
    assert "expected 'loader', got 'compute'" in wrong.message

    def sum_bound(loader_rate, compute_rate, measured_rate):  # no overlap assumed
        return _bottleneck(loader_rate, compute_rate, measured_rate)[0], 1.0

    bound = run_check("08.2", sum_bound)
    assert bound.verdict == "failed" and "expected at most 1.25x" in bound.message
    assert run_check("08.2", _stub).verdict == "not attempted yet"


def _fast_step(model, inputs, targets, optimizer):
    optimizer.zero_grad()
    inputs = inputs.contiguous(memory_format=torch.channels_last)
    with torch.autocast(device_type=inputs.device.type, dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


def test_fast_step():
    assert run_check("08.3", _fast_step).passed

    def no_autocast(model, inputs, targets, optimizer):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(
            model(inputs.contiguous(memory_format=torch.channels_last)), targets
        )
        loss.backward()
        optimizer.step()
        return loss.item()

    assert run_check("08.3", no_autocast).message == (
        "expected the forward pass under torch.autocast(dtype=torch.bfloat16), got autocast off"
    )

    def stale_gradients(model, inputs, targets, optimizer):
        inputs = inputs.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss.item()

    assert "were the old gradients cleared" in run_check("08.3", stale_gradients).message

    def contiguous_inputs(model, inputs, targets, optimizer):
        optimizer.zero_grad()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss.item()

    assert "expected inputs in channels_last" in run_check("08.3", contiguous_inputs).message
    assert run_check("08.3", _stub).verdict == "not attempted yet"


def _gpus_to_ask_for(rates, images, hours_limit):
    fitting = [n for n in sorted(rates) if images / rates[n] / 3600 <= hours_limit]
    if not fitting:
        return None
    return min(fitting, key=lambda n: n * images / rates[n])


def test_gpus_to_ask_for():
    assert run_check("08.4", _gpus_to_ask_for).passed

    def most_gpus(rates, images, hours_limit):  # the fastest, whatever it costs
        return max(rates)

    wrong = run_check("08.4", most_gpus)
    assert "expected 1 GPUs (10.0 GPU-hours, 10.0 h)" in wrong.message
    assert "got 8 (16.7 GPU-hours)" in wrong.message

    def ignores_the_limit(rates, images, hours_limit):
        return min(rates, key=lambda n: n * images / rates[n])

    late = run_check("08.4", ignores_the_limit)
    assert "hours_limit=6" in late.message and "expected 2 GPUs" in late.message
    assert run_check("08.4", _stub).verdict == "not attempted yet"


# ---- held-out cases ------------------------------------------------------------------------


def test_08_4_held_out_cases_fail_the_four_visible_answers_typed_in(held_out_catches):
    def typed_in(rates, images, hours_limit):
        return {12.0: 1, 6.0: 2, 3.0: 4, 2.0: None}.get(hours_limit, 1)

    failure = held_out_catches("08.4", _gpus_to_ask_for, typed_in)
    assert failure.startswith("gpus_to_ask_for({1: "), failure
