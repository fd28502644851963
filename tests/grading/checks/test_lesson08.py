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


def _gpu_loader(dataset, batch_size, cpus, device):
    return torch.utils.data.DataLoader(
        dataset, batch_size, shuffle=True, num_workers=cpus,
        pin_memory=device.type == "cuda", persistent_workers=cpus > 0,
    )  # fmt: skip


def test_gpu_loader():
    assert run_check("08.2", _gpu_loader).passed

    def always_pinned(dataset, batch_size, cpus, device):
        return torch.utils.data.DataLoader(
            dataset,
            batch_size,
            shuffle=True,
            num_workers=cpus,
            pin_memory=True,
            persistent_workers=cpus > 0,
        )

    wrong = run_check("08.2", always_pinned)
    assert wrong.message == (
        "gpu_loader(dataset, 32, cpus=1, device='cpu'): expected pin_memory=False (pin only when "
        "copying to a GPU), got pin_memory=True"
    )

    def no_persistence(dataset, batch_size, cpus, device):
        return torch.utils.data.DataLoader(
            dataset, batch_size, shuffle=True, num_workers=cpus, pin_memory=device.type == "cuda"
        )

    assert "persistent_workers=True" in run_check("08.2", no_persistence).message
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


def test_scaling_efficiency():
    assert run_check("08.4", lambda r1, rn, n: rn / (n * r1)).passed
    wrong = run_check("08.4", lambda r1, rn, n: rn / r1)  # the speedup, not the efficiency
    assert wrong.message == "scaling_efficiency(1000.0, 1800.0, 2): expected 0.9, got 1.8"
    assert run_check("08.4", _stub).verdict == "not attempted yet"
