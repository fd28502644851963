"""Checkers of lesson 08, making training fast."""

import copy
import time

import torch
from torch import nn

from course_utils.grading import call_answer, exercise, expect


class _SlowLoader:
    """Batches of known sizes, each taking `delay` seconds to produce; counts what was taken."""

    def __init__(self, sizes, delay):
        self.sizes, self.delay, self.taken = sizes, delay, 0

    def __iter__(self):
        for size in self.sizes:
            time.sleep(self.delay)
            self.taken += 1
            yield torch.zeros(size, 3, 4, 4), torch.zeros(size, dtype=torch.long)

    def __len__(self):
        return len(self.sizes)


@exercise("08.1", "time the data loader alone")
def check_time_loader(time_loader):
    sizes, delay = [16, 2, 2, 2, 16, 16], 0.02
    loader = _SlowLoader(sizes, delay)
    rate = call_answer(time_loader, loader, 4)
    expect(isinstance(rate, (int, float)), "a number (images per second)", type(rate).__name__)
    expect(loader.taken == 4, "exactly 4 batches taken from the loader", f"{loader.taken}")
    ceiling = sum(sizes[:4]) / (4 * delay)  # the loader cannot go faster than its sleeps
    expect(
        0.2 * ceiling < rate <= 1.05 * ceiling,
        f"about {ceiling:,.0f} images/s (22 images in 4 batches of 20 ms each)",
        f"{rate:,.0f} images/s",
        "count the images in each batch, divide by elapsed seconds",
    )
    return f"{rate:,.0f} images/s from the loader alone; it can go no faster than {ceiling:,.0f}"


@exercise("08.2", "a DataLoader that keeps a GPU fed")
def check_gpu_loader(gpu_loader):
    dataset = torch.utils.data.TensorDataset(torch.zeros(64, 3, 4, 4), torch.zeros(64))
    for device, cpus in (("cuda", 2), ("cpu", 1), ("cuda", 0)):
        loader = call_answer(gpu_loader, dataset, 32, cpus, torch.device(device))
        expect(
            isinstance(loader, torch.utils.data.DataLoader), "a DataLoader", type(loader).__name__
        )
        where = f"gpu_loader(dataset, 32, cpus={cpus}, device={device!r})"
        expect(loader.batch_size == 32, "batch_size 32", loader.batch_size, where)
        expect(
            loader.num_workers == cpus,
            f"num_workers={cpus} (one per allocated CPU)",
            f"num_workers={loader.num_workers}",
            where,
        )
        expect(
            loader.pin_memory == (device == "cuda"),
            f"pin_memory={device == 'cuda'} (pin only when copying to a GPU)",
            f"pin_memory={loader.pin_memory}",
            where,
        )
        expect(
            loader.persistent_workers == (cpus > 0),
            f"persistent_workers={cpus > 0} (keep workers alive between epochs)",
            f"persistent_workers={loader.persistent_workers}",
            where,
        )
        expect(
            isinstance(loader.sampler, torch.utils.data.RandomSampler),
            "shuffle=True",
            type(loader.sampler).__name__,
            where,
        )
    return "workers = allocated CPUs, kept alive across epochs, pinned only for a GPU"


class _Spy(nn.Module):
    """A small CNN that records the memory format and autocast state its forward pass saw."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 10)
        self.seen = []

    def forward(self, x):
        self.seen.append(
            (x.is_contiguous(memory_format=torch.channels_last), _autocast_dtype(x.device.type))
        )
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


def _autocast_dtype(device_type):
    if hasattr(torch, "get_autocast_dtype"):  # PyTorch >= 2.4
        on = torch.is_autocast_enabled(device_type)
        return torch.get_autocast_dtype(device_type) if on else None
    on = torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()
    return torch.get_autocast_cpu_dtype() if on else None


def _reference_step(model, inputs, targets, optimizer):
    optimizer.zero_grad(set_to_none=True)
    inputs = inputs.contiguous(memory_format=torch.channels_last)
    with torch.autocast(device_type=inputs.device.type, dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


@exercise("08.3", "a training step with channels_last and bf16 autocast")
def check_fast_step(fast_step):
    torch.manual_seed(0)
    model = _Spy().to(memory_format=torch.channels_last)
    inputs, targets = torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))
    for p in model.parameters():
        p.grad = torch.full_like(p, 100.0)  # stale gradients: the step must clear them
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_loss = _reference_step(
        reference, inputs, targets, torch.optim.SGD(reference.parameters(), lr=0.1)
    )
    loss = call_answer(fast_step, model, inputs, targets, optimizer)
    expect(len(model.seen) == 1, "one forward pass", f"{len(model.seen)}")
    channels_last, dtype = model.seen[0]
    expect(
        channels_last,
        "inputs in channels_last memory format inside the model",
        "contiguous (NCHW) inputs; use inputs.contiguous(memory_format=torch.channels_last)",
    )
    expect(
        dtype == torch.bfloat16,
        "the forward pass under torch.autocast(dtype=torch.bfloat16)",
        f"autocast {'off' if dtype is None else dtype}",
    )
    expect(isinstance(loss, float), "the loss as a Python float (loss.item())", type(loss).__name__)
    expect(abs(loss - ref_loss) < 1e-3, f"loss {ref_loss:.4f}", f"{loss:.4f}")
    same = all(
        torch.allclose(p, q, atol=1e-4) for p, q in zip(model.parameters(), reference.parameters())
    )
    expect(
        same,
        "parameters after one SGD step from fresh gradients",
        "other parameters (were the old gradients cleared with optimizer.zero_grad()?)",
    )
    return "channels_last inputs, bf16 autocast, fresh gradients, one optimizer step"


@exercise("08.4", "scaling efficiency of data-parallel training")
def check_scaling_efficiency(scaling_efficiency):
    cases = [((1000.0, 1800.0, 2), 0.9), ((1000.0, 4000.0, 4), 1.0), ((500.0, 1000.0, 8), 0.25)]
    for args, want in cases:
        got = call_answer(scaling_efficiency, *args)
        expect(
            isinstance(got, (int, float)) and abs(got - want) < 1e-9,
            want,
            got,
            f"scaling_efficiency{args}",
        )
    return "efficiency = throughput with n processes / (n x throughput with 1)"
