"""Lesson 08's probes: what its checks hand the learner's code, in the learner's process.

08.1: a loader (`LoggedLoader`) that logs each batch it hands out and when, given to the
learner's `time_loader`. 08.3: the two training jobs the check hands `name_the_bottleneck` (a
loader that counts its reads, one compute-bound, one loader-bound), run here, returning the
traces their function wrote. The judge reads each trace itself (checks/lesson08.py).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

import torch

from course_utils import data, profiling, throughput
from course_utils.grading import probe

SLOW_READ = 8e-3  # seconds per image of the loader-bound job: 16 images, 128 ms per batch


class CountedImages(torch.utils.data.Dataset):
    """A data set that counts its reads; each read sleeps `delay` seconds (a large JPEG)."""

    def __init__(self, dataset, delay: float = 0.0):
        self.dataset, self.delay, self.reads = dataset, delay, 0

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        self.reads += 1
        return self.dataset[i]


# name: (batch size, seconds per image read)
PROFILE_JOBS = {"compute": (128, 0.0), "loader": (16, SLOW_READ)}


def _profile_job(batch: int, delay: float):
    """A job to profile on the CPU, its model warmed up by one step first (oneDNN's first call
    is slow): a fast loader (compute limits it) or one that takes about 130 ms per batch of 16,
    many times the step's computation even on a busy machine (loading limits it)."""
    images = CountedImages(data.SyntheticCIFAR10(train=True, size=256), delay)
    model, optimizer = throughput.build(throughput.NAIVE, "cpu")
    model(torch.randn(batch, 3, 32, 32)).sum().backward()
    optimizer.zero_grad(set_to_none=True)
    loader = torch.utils.data.DataLoader(images, batch_size=batch, shuffle=True)
    return images, model, loader, optimizer


@contextlib.contextmanager
def _one_thread():
    """One torch thread while the jobs run: on a busy machine, threads that wait for each
    other at every operator make the computation's time swing by ten times and more."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _events(trace_path: Path) -> list | None:
    """The trace's complete events, only the fields the judge reads, or None: no trace."""
    if not trace_path.is_file():
        return None
    try:
        events = profiling.read_trace(trace_path)
    except (ValueError, KeyError):
        return []
    keep = ("name", "cat", "ts", "dur")
    return [{k: e[k] for k in keep if k in e} for e in events]


@probe("08.3")
def run_name_the_bottleneck(name_the_bottleneck):
    """In the learner's process: each job through their function, and the trace it wrote."""
    found = {}
    with tempfile.TemporaryDirectory() as tmp, _one_thread():
        for kind, (batch, delay) in PROFILE_JOBS.items():
            images, model, loader, optimizer = _profile_job(batch, delay)
            trace = Path(tmp) / f"{kind}-bound.json"
            start = time.perf_counter()
            answer = name_the_bottleneck(model, loader, optimizer, trace)
            seconds = time.perf_counter() - start
            found[kind] = {
                "answer": answer,
                "events": _events(trace),
                "reads": images.reads,
                "seconds": seconds,
            }
    return found


# ---- 08.1 ---------------------------------------------------------------------------------


class LoggedLoader:
    """Batches of known sizes, each taking `delay` seconds to produce (a slow disk); logs when
    each pass began and when each batch was handed out, with its size."""

    def __init__(self, sizes, delay: float):
        self.sizes, self.delay = list(sizes), float(delay)
        self.passes: list[float] = []  # perf_counter() at each iter()
        self.handed: list[tuple[int, float]] = []  # (images, perf_counter()) per batch

    def __iter__(self):
        self.passes.append(time.perf_counter())
        for size in self.sizes:
            time.sleep(self.delay)
            self.handed.append((size, time.perf_counter()))
            yield torch.zeros(size, 3, 4, 4), torch.zeros(size, dtype=torch.long)

    def __len__(self):
        return len(self.sizes)


@probe("08.1")
def run_time_loader(time_loader, sizes: list, delay: float, batches: int):
    loader = LoggedLoader(sizes, delay)
    rate = time_loader(loader, batches)
    return {"rate": rate, "passes": loader.passes, "handed": loader.handed}
