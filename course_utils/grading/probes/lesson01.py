"""Lesson 01's probes: what its checks run in the learner's process.

01.1: the learner's flatten on a small batch, then their measurement of a view against a copy on
a big one, drawn from the check's seed; 01.2: their broadcasting against a loop, measured on a
matrix drawn from the seed; each reports what came back (the tensors' memory, the Measurements)
as plain data. 01.3: their `to_numpy` on a tensor that requires grad, a CPU tensor (is its memory
shared?) and a tensor that behaves as a GPU tensor does (`evidence.ReportsCuda`). The judge times
the same operations itself and holds the learner's figures to its own (checks/lesson01.py).
"""

import numpy as np
import torch

from course_utils.grading import probe
from course_utils.grading.judge.evidence import ReportsCuda, measurement, outcome, storage

# Large enough that a copy costs far more than a view's bookkeeping, small enough to be quick.
BATCH = (64, 3, 64, 64)
# A wide, short matrix: a Python loop pays once per column, broadcasting once per element. The
# loop takes about 40 times as long here (19 ms against 0.5 ms on 2 busy cores), so the two
# timings stay apart under load; (1000, 300) gave only 4-7 times on a busy machine.
COLUMNS = (100, 500)


def batch_of(shape, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


@probe("01.1")
def run_flatten(batch_flatten, view_and_copy_costs, seed: int):
    """In the learner's process: their flatten on a small batch, then their measurement on a
    big one; what came back, as plain data."""
    small, images = batch_of((8, 3, 4, 4), seed), batch_of(BATCH, seed + 1)
    flat = batch_flatten(small)
    records = view_and_copy_costs(images)
    report = {"flat": flat, "flat_shares": storage(flat) == storage(small)}
    if isinstance(records, dict):
        view, copy = records.get("view"), records.get("copy")
        report["records"] = {
            "keys": sorted(map(str, records)),
            "view_shares": storage(view) == storage(images),
            "copy_shares": storage(copy) == storage(images),
            "copy_bytes": copy.untyped_storage().nbytes() if storage(copy) else None,
            "equal": bool(torch.equal(view, copy)) if storage(view) and storage(copy) else False,
            "view_time": measurement(records.get("view_time")),
            "copy_time": measurement(records.get("copy_time")),
        }
    else:
        report["records"] = type(records).__name__
    return report


@probe("01.2")
def run_broadcast(broadcast_vs_loop, seed: int):
    records = broadcast_vs_loop(batch_of(COLUMNS, seed))
    if not isinstance(records, dict):
        return type(records).__name__
    return {
        "keys": sorted(map(str, records)),
        "result": records.get("result")
        if isinstance(records.get("result"), torch.Tensor)
        else None,
        "broadcast_time": measurement(records.get("broadcast_time")),
        "loop_time": measurement(records.get("loop_time")),
    }


@probe("01.3")
def run_to_numpy(to_numpy):
    """Three tensors: one that requires grad, a CPU one (is its memory shared?), and one that
    behaves as a GPU tensor does (ReportsCuda)."""
    w = torch.linspace(0, 1, 5, requires_grad=True)
    grad = outcome(to_numpy, w * 2)
    plain = torch.zeros(3)
    shared = to_numpy(plain)
    plain[0] = 7.0
    shares = type(shared) is np.ndarray and shared.size == 3 and float(shared[0]) == 7.0
    on_gpu = outcome(to_numpy, (torch.arange(3.0) + 1).as_subclass(ReportsCuda))
    return {"grad": grad, "shares": shares, "gpu": on_gpu}
