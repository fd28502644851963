"""Checkers of lesson 08, making training fast."""

import copy
import time

import torch
from torch import nn

from course_utils import speed
from course_utils.grading import call_answer, exercise, expect, held_out


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
    return (
        f"on the check's own slow loader (4 batches of 20 ms): {rate:,.0f} images/s of at most "
        f"{ceiling:,.0f} images/s"
    )


# (loader alone, compute alone, the job as measured): images per second, each from a profile
BOTTLENECK_CASES = [
    (2000.0, 8000.0, 1600.0),  # loader-bound, no overlap yet
    (9000.0, 3000.0, 2250.0),  # compute-bound, no overlap yet
    (4000.0, 4000.0, 3900.0),  # balanced, already overlapping
    (500.0, 40000.0, 490.0),  # loader-bound, nearly all loading: a faster loader is the only fix
]


@exercise("08.2", "which part limits the job, and how much faster could it go?")
def check_bottleneck(bottleneck):
    for case in BOTTLENECK_CASES:
        want_limit, want_bound = speed.bottleneck(*case)
        where = "bottleneck(loader_rate={:g}, compute_rate={:g}, measured_rate={:g})".format(*case)
        got = call_answer(bottleneck, *case)
        expect(isinstance(got, tuple) and len(got) == 2, "a pair (limit, speed-up bound)",
               repr(got), where)  # fmt: skip
        limit, bound = got
        expect(limit == want_limit, repr(want_limit), repr(limit), where)
        expect(
            isinstance(bound, (int, float)) and abs(bound - want_bound) < 1e-6 * want_bound,
            f"at most {want_bound:.3g}x (the slower part's rate / the measured rate: loading "
            "and computing overlapped, the step takes as long as the slower one)",
            f"{bound!r}",
            where,
        )
    return "the slower of loading and computing bounds the job, once they overlap"


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


# Measured throughput (images/s) of one training with 1, 2, 4 and 8 GPUs (DDP on one node).
GPU_RATES = {1: 1000.0, 2: 1900.0, 4: 3400.0, 8: 4800.0}
WORK = 36_000_000  # images: 720 epochs of 50,000


def _gpu_hours(rates, n, images):
    return n * images / rates[n] / 3600


def _best_gpus(rates, images, hours_limit):
    fitting = [n for n in sorted(rates) if images / rates[n] / 3600 <= hours_limit]
    if not fitting:
        return None
    return min(fitting, key=lambda n: (_gpu_hours(rates, n, images), n))


@exercise("08.4", "how many GPUs to ask for: wall time against GPU-hours")
def check_gpus_to_ask_for(gpus_to_ask_for):
    for hours in (12.0, 6.0, 3.0, 2.0):
        want = _best_gpus(GPU_RATES, WORK, hours)
        got = call_answer(gpus_to_ask_for, dict(GPU_RATES), WORK, hours)
        where = f"gpus_to_ask_for(rates, images={WORK:,}, hours_limit={hours:g})"
        if want is None:
            expect(got is None, "None (no count finishes in time)", repr(got), where)
            continue
        charged = _gpu_hours(GPU_RATES, got, WORK) if got in GPU_RATES else None
        expect(
            got == want,
            f"{want} GPUs ({_gpu_hours(GPU_RATES, want, WORK):.1f} GPU-hours, "
            f"{WORK / GPU_RATES[want] / 3600:.1f} h)",
            f"{got!r}" + (f" ({charged:.1f} GPU-hours)" if charged else ""),
            where,
        )
    return "the fewest GPU-hours among the counts that finish within the limit"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("08.4", cases=4)
def held_out_gpus_to_ask_for(rng, gpus_to_ask_for):
    """Other scaling curves, workloads and limits: the four visible answers typed in fail them."""
    one = rng.choice([500.0, 1_000.0, 2_500.0])
    rates = {n: one * n * rng.uniform(0.5, 1.0) ** (n > 1) for n in (1, 2, 4, 8)}
    images, hours = rng.choice([1, 3, 10]) * 10**7, rng.choice([1.0, 2.0, 4.0, 8.0, 24.0])
    want = _best_gpus(rates, images, hours)
    got = call_answer(gpus_to_ask_for, dict(rates), images, hours)
    rounded = {n: round(r) for n, r in rates.items()}
    where = f"gpus_to_ask_for({rounded}, images={images:,}, hours_limit={hours:g})"
    expect(got == want, "None (no count finishes in time)" if want is None else f"{want} GPUs",
           repr(got), where)  # fmt: skip
