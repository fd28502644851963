"""Checkers of lesson 02, from CPU to GPU and CPU parallelism.

The device exercises are checked on the `meta` device, which every PyTorch has: it keeps shapes,
dtypes and device placement without memory, so moving data there proves the code is device-agnostic.
"""

import unittest.mock

import torch

from course_utils.grading import call_answer, exercise, expect


@exercise("02.1", "the --disable-cuda pattern")
def check_choose_device(choose_device):
    with unittest.mock.patch("torch.cuda.is_available", return_value=True):
        on_gpu_node = call_answer(choose_device, False)
        disabled = call_answer(choose_device, True)
    with unittest.mock.patch("torch.cuda.is_available", return_value=False):
        on_cpu_node = call_answer(choose_device, False)
    for got in (on_gpu_node, disabled, on_cpu_node):
        expect(isinstance(got, torch.device), "a torch.device", type(got).__name__)
    expect(
        on_gpu_node.type == "cuda",
        "cuda when a GPU is available",
        on_gpu_node,
        "choose_device(False)",
    )
    expect(
        disabled.type == "cpu", "cpu when --disable-cuda is given", disabled, "choose_device(True)"
    )
    expect(
        on_cpu_node.type == "cpu",
        "cpu when no GPU is available",
        on_cpu_node,
        "choose_device(False)",
    )
    return "GPU when there is one, CPU when asked or when there is none"


@exercise("02.2", "move a batch to the model's device")
def check_to_device(batch_to):
    inputs, targets = torch.randn(4, 3, 32, 32), torch.tensor([1, 2, 3, 4])
    got = call_answer(batch_to, (inputs, targets), torch.device("meta"))
    expect(
        isinstance(got, tuple) and len(got) == 2, "a tuple (inputs, targets)", type(got).__name__
    )
    devices = [t.device.type for t in got]
    expect(devices == ["meta", "meta"], "both tensors on the meta device", devices)
    expect(
        got[0].dtype == torch.float32 and got[1].dtype == torch.int64,
        "dtypes kept (float32, int64)",
        [t.dtype for t in got],
    )
    return "inputs and targets follow the model to its device"


@exercise("02.3", "noise that matches a tensor's device and dtype")
def check_like(add_noise):
    for x in (torch.zeros(3, 2, dtype=torch.float64), torch.zeros(5, device="meta")):
        got = call_answer(add_noise, x, 0.1)
        expect(
            got.device == x.device and got.dtype == x.dtype,
            f"device {x.device} and dtype {x.dtype}",
            f"device {got.device}, dtype {got.dtype}",
            "noise for a tensor on another device or in another dtype",
        )
        expect(got.shape == x.shape, f"shape {tuple(x.shape)}", tuple(got.shape))
    cpu = torch.zeros(10_000, dtype=torch.float64)
    std = float(call_answer(add_noise, cpu, 0.1).std())
    expect(abs(std - 0.1) < 0.01, "noise with standard deviation 0.1", f"{std:.3f}")
    return "randn_like / new_* keep the device and dtype of their model tensor"


@exercise("02.4", "should this job ask for a GPU?")
def check_decision(ask_for_gpu):
    # (cpu images/s, gpu images/s, images to process, gpu queue wait s) -> answer
    cases = [
        ((2_000, 40_000, 500_000, 600), False),  # 250 s on CPU vs 12.5 s + 600 s wait
        ((2_000, 40_000, 50_000_000, 600), True),  # hours on CPU
        ((2_000, 40_000, 500_000, 60), True),  # 250 s vs 12.5 s + 60 s
        ((2_000, 40_000, 200_000, 600), False),  # 100 s on CPU vs 605 s
        ((2_000, 2_500, 5_000_000, 3_600), False),
    ]  # GPU barely faster, long wait
    for args, want in cases:
        got = call_answer(ask_for_gpu, *args)
        expect(got is want, want, got, f"ask_for_gpu{args}")
    return "a GPU pays when compute time saved exceeds the extra queue wait"
