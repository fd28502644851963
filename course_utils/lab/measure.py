"""What the lab's training job measures in every rank: step times, the share of a step spent
waiting for communication, one all-reduce, and the connections gloo opened. Lesson 10's
program (course_utils.jobs.lab_train) calls these; every rank must call each collective one the
same number of times.

Why not `timing.time_fn`: it picks its repetition count itself, per process, so two ranks would
repeat a collective a different number of times and wait for each other for ever. Here each
step is timed between two synchronizations of the device, a fixed number of times, and the
median taken.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable

import psutil
import torch
import torch.distributed as dist

from course_utils.device import synchronize


def timed_steps(step: Callable, batches: Iterable, device, warmup: int) -> tuple[list, list]:
    """Run `step(inputs, targets)` on each batch; returns (seconds of each step after the first
    `warmup`, the losses it returned). Each step is timed between device synchronizations."""
    seconds, losses = [], []
    for i, (inputs, targets) in enumerate(batches):
        synchronize(device)
        start = time.perf_counter()
        loss = step(inputs, targets)
        synchronize(device)
        if i >= warmup:
            seconds.append(time.perf_counter() - start)
        losses.append(float(loss))
    return seconds, losses


def threads_per_rank(allocated: int, mine: set[int], on_machine: list[set[int]]) -> int:
    """Torch threads for a rank: its allocated CPUs, but no more than its share of the CPUs it
    may run on, shared with the ranks on its machine (itself included in `on_machine`) whose
    CPUs overlap its own. With core binding each rank has its own; without it (torchrun's
    workers in one task, a site that does not confine tasks) 4 ranks on 2 CPUs get 1 each."""
    sharers = max(1, sum(1 for cpus in on_machine if cpus & mine))
    return max(1, min(allocated, len(mine) // sharers))


def communication_share(with_sync: float, without_sync: float) -> float:
    """Share of a step spent waiting for the gradient all-reduce: 1 - t(no sync) / t(sync),
    from two medians of the same forward and backward; 0 when syncing cost nothing visible."""
    if with_sync <= 0 or without_sync <= 0:
        raise ValueError(f"step times {with_sync}, {without_sync} must be > 0 seconds")
    return max(0.0, 1.0 - without_sync / with_sync)


def exposed_communication(ddp, inputs, targets, loss_fn, device, repeats: int = 3) -> float:
    """`communication_share` of forward + backward on one batch: `repeats` times with DDP's
    gradient all-reduce, `repeats` times inside `ddp.no_sync()` (gradients stay local), in
    turns. The optimizer is not stepped, so the replicas stay identical."""

    def once():
        ddp.zero_grad(set_to_none=True)
        synchronize(device)
        start = time.perf_counter()
        loss_fn(ddp(inputs), targets).backward()
        synchronize(device)
        return time.perf_counter() - start

    synced, local = [], []
    for _ in range(repeats):
        synced.append(once())
        with ddp.no_sync():
            local.append(once())
    ddp.zero_grad(set_to_none=True)
    return communication_share(statistics.median(synced), statistics.median(local))


ALLREDUCE_ITERATIONS = 5  # timed, after 2 untimed


def allreduce_seconds(
    nbytes: int, device, iterations: int = ALLREDUCE_ITERATIONS, warmup: int = 2, group=None
) -> float:
    """Median seconds of one all-reduce of `nbytes` (float32) on every rank of `group` (None:
    the default group), the slowest rank's median."""
    tensor = torch.ones(max(1, nbytes // 4), device=device)
    times = []
    for i in range(warmup + iterations):
        dist.barrier()
        synchronize(device)
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    worst = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
    # the collective is as slow as its slowest rank
    dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group)
    return float(worst)


def gather(obj) -> list:
    """`obj` of every rank, in rank order (all_gather_object)."""
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def tcp_connections() -> list[tuple[tuple[str, int], tuple[str, int]]]:
    """(local, remote) address pairs of this process's established TCP connections."""
    return [
        ((c.laddr.ip, c.laddr.port), (c.raddr.ip, c.raddr.port))
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.status == psutil.CONN_ESTABLISHED
    ]


def interface_addresses() -> dict[str, str]:
    """{IP address: network interface} of this node (lo, eth0, ib0, ...)."""
    return {
        a.address.split("%")[0]: name
        for name, addresses in psutil.net_if_addrs().items()
        for a in addresses
        if a.family.name in ("AF_INET", "AF_INET6")
    }
