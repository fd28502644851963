"""Checkers of lesson 08, making training fast."""

import contextlib
import tempfile
import time
from pathlib import Path

import torch

from course_utils import data, profiling, speed, throughput
from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out


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
        expect(
            isinstance(got, tuple) and len(got) == 2,
            "a pair (limit, speed-up bound)",
            repr(got),
            where,
        )
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


class _SlowImages(torch.utils.data.Dataset):
    """A data set whose every image takes `delay` seconds to load (decoding a large JPEG)."""

    def __init__(self, dataset, delay):
        self.dataset, self.delay = dataset, delay

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        time.sleep(self.delay)
        return self.dataset[i]


def _profile_cases(root: Path) -> dict:
    """Two jobs to profile on the CPU, each model warmed up by one step first (oneDNN's first
    call is slow): a fast loader (compute limits it) and a loader that takes about 130 ms per
    batch of 16, many times the step's computation, even on a busy machine (loading limits it)."""
    images = data.SyntheticCIFAR10(train=True, size=256)
    cases = {}
    for name, dataset, batch in (
        ("compute", images, 128),
        ("loader", _SlowImages(images, 8e-3), 16),
    ):
        model, optimizer = throughput.build(throughput.NAIVE, "cpu")
        model(torch.randn(batch, 3, 32, 32)).sum().backward()
        optimizer.zero_grad(set_to_none=True)
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True)
        cases[name] = (model, loader, optimizer, root / f"{name}-bound.json")
    return cases


def _limit_in(trace_path: Path) -> tuple[str, float]:
    """What the trace says limits the job (loading and computing do not overlap without
    workers: the part that takes more than half the step), and the loading share."""
    expect(
        trace_path.is_file(),
        f"a torch.profiler trace at {trace_path.name} (prof.export_chrome_trace(trace_path))",
        "no file there",
    )
    events = profiling.read_trace(trace_path)
    expect(
        any("convolution_backward" in e["name"] for e in events),
        "the whole training step inside the profile (forward, backward, optimizer step)",
        "a trace without the backward pass",
    )
    try:
        share = profiling.loading_share(events)
    except ValueError as e:
        raise CheckFailed(str(e)) from e
    return ("loader" if share > 0.5 else "compute"), share


@contextlib.contextmanager
def _one_thread():
    """One torch thread while the check's jobs run: on a busy machine, threads that wait for
    each other at every operator make the computation's time swing by ten times and more."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@exercise("08.3", "profile your own training step and name its bottleneck")
def check_name_the_bottleneck(name_the_bottleneck):
    with tempfile.TemporaryDirectory() as tmp, _one_thread():
        for want_case, (model, loader, optimizer, trace) in _profile_cases(Path(tmp)).items():
            got = call_answer(name_the_bottleneck, model, loader, optimizer, trace)
            limit, share = _limit_in(trace)
            where = f"on the check's {want_case}-bound job"
            expect(
                got == limit,
                f"{limit!r} (your trace: fetching batches took {share:.0%} of the profiled loop)",
                repr(got),
                where,
            )
            expect(
                limit == want_case,
                f"a {want_case}-bound trace",
                f"{share:.0%} loading",
                f"{where} (the machine too busy to tell? run the check again)",
            )
    # the shares vary from run to run; the pass line does not (nbval compares it)
    return "your traces of the check's compute-bound and loader-bound jobs, each named right"


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
    expect(
        got == want,
        "None (no count finishes in time)" if want is None else f"{want} GPUs",
        repr(got),
        where,
    )
