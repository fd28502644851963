"""Checkers of lesson 05, distributed data parallel."""

import torch
from torch.utils.data import DistributedSampler

from course_utils.grading import call_answer, exercise, expect

SLURM_CASES = [
    # (environment of one srun task, expected (rank, local_rank, world_size))
    (
        {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_NODEID": "2"},
        (5, 1, 8),
    ),
    (
        {"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "1", "SLURM_NODEID": "0"},
        (0, 0, 1),
    ),
    (
        {"SLURM_PROCID": "7", "SLURM_LOCALID": "3", "SLURM_NTASKS": "16", "SLURM_NODEID": "1"},
        (7, 3, 16),
    ),
]


@exercise("05.2", "rank, local rank and world size from a Slurm task's environment")
def check_ranks_from_slurm(ranks_from_slurm):
    for environ, want in SLURM_CASES:
        got = call_answer(ranks_from_slurm, dict(environ))
        expect(isinstance(got, tuple) and all(isinstance(v, int) for v in got),
               "a tuple of three ints", repr(got))  # fmt: skip
        expect(got == want, want, got, f"ranks_from_slurm({environ})")
    return (
        "SLURM_PROCID is the global rank, SLURM_LOCALID the rank on the node, SLURM_NTASKS the size"
    )


@exercise("05.1", "a new shuffle every epoch: DistributedSampler.set_epoch")
def check_epoch_orders(epoch_orders):
    dataset = torch.arange(16)
    sampler = DistributedSampler(dataset, num_replicas=2, rank=0, shuffle=True, seed=0)
    got = call_answer(epoch_orders, sampler, 3)
    expect(isinstance(got, list) and len(got) == 3, "a list of 3 index lists", repr(got)[:80])
    want = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        want.append(list(sampler))
    got = [list(map(int, order)) for order in got]
    expect(got[0] != got[1], "a different order in epoch 0 and epoch 1",
           "the same order (call sampler.set_epoch(epoch) at the start of each epoch)")  # fmt: skip
    expect(got == want, want, got, "the order of each epoch")
    return "each epoch reshuffles, identically on every rank (seed + epoch)"


@exercise("05.3", "scale the learning rate with the global batch")
def check_scaled_lr(scaled_lr):
    cases = [((0.1, 256, 64, 8), 0.2), ((0.1, 256, 256, 1), 0.1), ((0.05, 128, 32, 2), 0.025)]
    for args, want in cases:
        got = call_answer(scaled_lr, *args)
        call = "scaled_lr(base_lr={}, base_batch={}, per_rank_batch={}, world_size={})"
        call = call.format(*args)
        expect(isinstance(got, float) and abs(got - want) < 1e-12, want, got, call)
    return "linear scaling: lr grows with the global batch = per-rank batch x world size"
