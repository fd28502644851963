"""Lesson 02's probes: what its checks hand the learner's code, in the learner's process.

02.1: `run_choose_device` calls `choose_device` as a GPU node and as a CPU node would answer
(torch.cuda's and torch.accelerator's answers patched there), on the cases the check gives.
02.2 and 02.3 are measurements the learner's code makes: `run_thread_rates` hands it a step
(`CountedStep`) that logs each call's thread count and seconds, `run_loader_rates` a data set
(`CountedReads`) that logs each read's loader, worker and time in shared memory, as DataLoader
workers are processes. Each reports the learner's figures, the log and the allocation as plain
data; the judge times the same work itself (checks/lesson02.py).
"""

import contextlib
import math
import os
import time
import unittest.mock

import torch
from torch.utils.data import Dataset, get_worker_info

from course_utils import answer_jobs, hpc
from course_utils.grading import probe
from course_utils.grading.judge.evidence import outcome

STEP_BATCH, LOADER_BATCH = 256, 64  # images per step (02.2) and per batch (02.3)

# ---- 02.1 ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _node_with_gpus(count: int):
    """torch.cuda (and torch.accelerator, as far as this PyTorch has it) answer as on a node
    with `count` GPUs."""
    with contextlib.ExitStack() as stack:
        for module in (torch.cuda, getattr(torch, "accelerator", None)):
            for name in ("is_available", "device_count"):
                if hasattr(module, name):
                    answer = count > 0 if name == "is_available" else count
                    patched = unittest.mock.patch.object(module, name, return_value=answer)
                    stack.enter_context(patched)
        yield


@probe("02.1")
def run_choose_device(choose_device, nodes: list):
    """`choose_device(disable)` on each of `nodes`, (GPUs on the node, disable_cuda) pairs."""
    found = []
    for gpus, disable in nodes:
        with _node_with_gpus(gpus):
            got = outcome(choose_device, disable)
        value = got.get("value")
        device = value if type(value) is torch.device else None
        found.append({"raised": got.get("raised"), "device": device, "kind": type(value).__name__})
    return found


# ---- 02.2 ---------------------------------------------------------------------------------


@contextlib.contextmanager
def allocation(cpus):
    """`hpc.allocated_cpus()` answers `cpus` meanwhile (a test's injected allocation); None: as
    it is."""
    if cpus is None:
        yield
        return
    with unittest.mock.patch.object(hpc, "allocated_cpus", return_value=int(cpus)):
        yield


# ---- 02.2 ---------------------------------------------------------------------------------


class CountedStep:
    """A training step's stand-in that logs each call: torch's intra-op threads, its seconds."""

    def __init__(self, size: int = 384):
        generator = torch.Generator().manual_seed(0)
        self.a = torch.randn(size, size, generator=generator)
        self.b = torch.randn(size, size, generator=generator)
        self.calls: list[tuple[int, float]] = []

    def work(self):
        return torch.mm(self.a, self.b).sum()

    def __call__(self):
        start = time.perf_counter()
        self.work()
        self.calls.append((torch.get_num_threads(), time.perf_counter() - start))


@probe("02.2")
def run_thread_rates(thread_rates, batch_size: int, cpus=None):
    step = CountedStep()
    try:
        with allocation(cpus):
            allocated = hpc.allocated_cpus()
            rates = thread_rates(step, batch_size)
            restored = torch.get_num_threads()
    finally:
        hpc.configure_threads()
    return {"rates": rates, "calls": step.calls, "allocated": allocated, "restored": restored}


@probe("02.2/digest")
def thread_rates_digest(thread_rates) -> str | None:
    """The digest of the learner's thread_rates as their cell defines it now (its job's command
    line carries the digest of the version it ran); None where Python cannot read its source."""
    return answer_jobs.digest_if_readable(thread_rates)


# ---- 02.3 ---------------------------------------------------------------------------------


def loader_images(allocated: int, batch_size: int = LOADER_BATCH) -> int:
    """Images in 02.3's data set: at least two batches for every worker of the largest loader."""
    return max(1024, 2 * batch_size * allocated)


class CountedReads(Dataset):
    """Small images that log each read in shared memory: the loader that read it (row: its
    num_workers, 0 for none), the process (column: 0 the main one, i + 1 worker i), and the
    first and last time of each. Each cell has one writer: no race."""

    def __init__(self, n: int, allocated: int):
        self.images = torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(0))
        size = allocated + 2  # the last row and column: more workers than allocated
        self.reads = torch.zeros(size, size, dtype=torch.int64).share_memory_()
        self.times = torch.zeros(size, size, 2, dtype=torch.float64).share_memory_()

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        reads, times = self._views()
        info, last = get_worker_info(), len(reads) - 1
        row = 0 if info is None else min(info.num_workers, last)
        col = 0 if info is None else min(info.id + 1, last)
        now = time.perf_counter()  # CLOCK_MONOTONIC: one clock for every process of the machine
        if not reads[row, col]:
            times[row, col, 0] = now
        times[row, col, 1] = now
        reads[row, col] += 1
        return self.images[i], 0

    def _views(self):
        """NumPy views of the shared logs, made in each process (a tensor's element-wise
        update costs microseconds, as much as the rest of a read)."""
        if getattr(self, "_pid", None) != os.getpid():
            self._pid, self._numpy = os.getpid(), (self.reads.numpy(), self.times.numpy())
        return self._numpy

    def __getstate__(self):  # a spawned worker gets the shared tensors, not copies of views
        return {k: v for k, v in self.__dict__.items() if k not in ("_pid", "_numpy")}


@probe("02.3")
def run_loader_rates(loader_rates, batch_size: int, cpus=None):
    with allocation(cpus):
        allocated = hpc.allocated_cpus()
        dataset = CountedReads(loader_images(allocated, batch_size), allocated)
        rates = loader_rates(dataset, batch_size)
    firsts = torch.where(dataset.reads > 0, dataset.times[..., 0], math.inf).amin(1)
    spans = (dataset.times[..., 1].amax(1) - firsts).clamp(min=0).tolist()
    return {"rates": rates, "allocated": allocated, "reads": dataset.reads.tolist(), "spans": spans}
