"""Inter-op parallelism: two independent pieces of work at the same time (lesson 02).

Intra-op parallelism splits one operator over the threads of `torch.set_num_threads`. Inter-op
parallelism runs independent operators at the same time, on the pool sized by
`torch.set_num_interop_threads` (`hpc.configure_interop_threads`). The cluster documentation's
route is TorchScript: `torch.jit.fork` and `torch.jit.wait` inside a scripted function (called
from plain Python, fork runs its call at once, in sequence). TorchScript is deprecated and says so
with a FutureWarning; `scripted_fork` catches it and hands it back as one line. In eager PyTorch,
Python threads do the same job, since operators release the GIL while they compute.

Every route computes the same two results; they differ only in how the work meets the cores.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

Pair = tuple[torch.Tensor, torch.Tensor]


STEPS = 50  # matmuls per chain: lesson 02 divides its timings by them


def chain(x: torch.Tensor, w: torch.Tensor, steps: int = STEPS) -> torch.Tensor:
    """One piece of work: `steps` small matmuls in a row, each too small to split well."""
    for _ in range(steps):
        x = torch.tanh(x @ w)
    return x


def sequential(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> Pair:
    """chain(a), then chain(b): one after the other, each on the intra-op threads."""
    return chain(a, w), chain(b, w)


def _forked(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    future = torch.jit.fork(chain, a, w)  # runs on the inter-op pool ...
    y = chain(b, w)  # ... while this thread computes the other chain
    return torch.jit.wait(future), y


@functools.cache
def scripted_fork() -> tuple[Callable[..., Pair], str]:
    """The fork/wait function compiled by TorchScript (once per process), and the deprecation
    warning that compiling gave, as one line ("" where this PyTorch gave none)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        function = torch.jit.script(_forked)
    notes = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    return function, notes[0] if notes else ""


def forked(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> Pair:
    """chain(a) and chain(b) at the same time, TorchScript's way: fork, then wait."""
    function, _ = scripted_fork()
    return function(a, b, w)


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """One worker thread per process, made on first use."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="interop")


def threaded(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> Pair:
    """chain(a) and chain(b) at the same time, eager PyTorch's way: a second Python thread."""
    future = _pool().submit(chain, a, w)
    y = chain(b, w)
    return future.result(), y


ROUTES: dict[str, Callable[..., Pair]] = {
    "one after the other": sequential,
    "torch.jit.fork (TorchScript)": forked,
    "Python threads": threaded,
}
