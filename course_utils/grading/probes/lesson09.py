"""Lesson 09's probes: what its checks run in the learner's process.

A probe returns plain data. Those of the run exercises watch the course's own function that the
learner's code must call, by replacing it for the length of the call with one that calls the
real one and notes what it started and what it gave back (`watching`): the ranks of
`launching.run_ranks` (09.2, each rank's flight record of the collectives it entered), the job
of `batch.submit` or `batch.local_run` (09.3), the reading of `job_memory.read_loader` (09.5).
What a learner's function returns counts only when it is what that real call returned. The
judge's own runs of the same things are in checks/lesson09_references.py.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
import unittest.mock
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils import batch, launching
from course_utils.failing import failures, job_memory
from course_utils.grading import probe

LOSS_STEP_TIMEOUT = 5.0  # seconds: the longest timeout a 09.2 run gets (a hang ends by then)
JOB_FOLDER = "runs/09/jobs"  # beside the notebook: where 09.3's job writes its output
JOB_TIMEOUT = 240.0  # seconds: the longest wait for 09.3's job
SHARED_LOADER_SHAPE = (3, 64, 64)  # 09.5's images


@contextlib.contextmanager
def watching(module, name: str, watch):
    """`module.name` replaced meanwhile by `watch(real, *args, **kwargs)`."""
    real = getattr(module, name)

    def watched(*args, **kwargs):
        return watch(real, *args, **kwargs)

    with unittest.mock.patch.object(module, name, watched):
        yield


# ---- 09.1 ---------------------------------------------------------------------------------


@probe("09.1")
def notebook_runs(runs_folder):
    """The runs this notebook provoked (its folder is the learner's): each log with its truth."""
    return [
        {"name": run.name, "output": run.output, "truth": run.truth}
        for run in failures.load_runs(runs_folder)
    ]


# ---- 09.2 ---------------------------------------------------------------------------------


def _collectives() -> list[str] | None:
    """The collectives this rank has entered, from its flight record (None: this PyTorch keeps
    none for gloo)."""
    from course_utils.failing import flight_recorder

    if not flight_recorder.gloo_dump_available():
        return None
    from torch._C import _distributed_c10d as c10d

    record = pickle.loads(c10d._dump_fr_trace(includeStackTraces=False))
    return [str(e.get("profiling_name", "")).split(":")[-1] for e in record.get("entries", [])]


@probe("09.2")
def run_step_on_ranks(run_step, losses: list):
    """The learner's `run_step(losses)`, with launching.run_ranks watched: each rank reports,
    beside what the learner's function returned there, its process and the collectives it
    entered; a run that failed is reported as such."""
    runs = []

    def watch(real, fn, world_size=2, timeout=3.0, env=None):
        def traced(rank, size):
            result = fn(rank, size)
            return {"result": result, "pid": os.getpid(), "collectives": _collectives()}

        env = {**(env or {}), "TORCH_FR_BUFFER_SIZE": "64"}
        seen = {"world_size": world_size, "parent": os.getpid()}
        runs.append(seen)
        try:
            ranks = real(traced, world_size, min(float(timeout), LOSS_STEP_TIMEOUT), env)
        except launching.RanksFailed as e:
            seen["failed"] = str(e)
            raise
        seen["ranks"] = ranks
        seen["returned"] = [r["result"] for r in ranks]
        return list(seen["returned"])

    with watching(launching, "run_ranks", watch):
        try:
            returned = run_step(list(losses))
        except launching.RanksFailed:
            returned = None
    return {"returned": returned, "runs": runs}


# ---- 09.3 ---------------------------------------------------------------------------------


@probe("09.3")
def run_the_job(run_repaired, script: str, seed: int):
    """The learner's `run_repaired(script, folder, seed)`, with batch.submit and
    batch.local_run watched: the job returned must be one they started."""
    jobs = []

    def watch_submit(real, path, args=(), **options):
        options["timeout"] = min(float(options.get("timeout", JOB_TIMEOUT)), JOB_TIMEOUT)
        job = real(path, args, **options)
        text = Path(path).read_text() if Path(path).is_file() else ""
        jobs.append((job, {"route": "slurm", "script": text, "args": [str(a) for a in args]}))
        return job

    def watch_local(real, name, module, args, shape, threads=1, timeout=300, environ=None):
        timeout = min(float(timeout), JOB_TIMEOUT)
        job = real(name, module, args, shape, threads, timeout, environ)
        seen = {"route": "local", "module": module, "ranks": shape.ranks, "nodes": shape.nodes}
        jobs.append((job, {**seen, "args": [str(a) for a in args]}))
        return job

    folder = Path(JOB_FOLDER)
    folder.mkdir(parents=True, exist_ok=True)
    with watching(batch, "submit", watch_submit), watching(batch, "local_run", watch_local):
        job = run_repaired(script, str(folder), seed)
    if job is None:
        return None
    started = [seen for real, seen in jobs if real is job]
    if not started:
        return {"started": False, "kind": type(job).__name__, "calls": len(jobs)}
    return {
        "started": True,
        **started[0],
        "job_id": job.job_id,
        "returncode": job.returncode,
        "state": job.state,
        "output": job.output[-8000:],
    }


# ---- 09.4 ---------------------------------------------------------------------------------


def recording_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    seen = []
    model.register_forward_pre_hook(lambda module, args: seen.append(len(args[0])))
    return model, seen


def accumulation_batch(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 3, generator=g), torch.randn(rows, 2, generator=g)


@probe("09.4")
def accumulate(accumulate_gradients, rows: int, micro_batches: int, seed: int):
    """The learner's function on the check's model (which notes each batch it sees)."""
    x, y = accumulation_batch(rows, seed)
    model, seen = recording_model()
    accumulate_gradients(model, x, y, micro_batches)
    grads = [
        None if p.grad is None else p.grad.detach().as_subclass(torch.Tensor).clone()
        for p in model.parameters()
    ]
    return {"seen": [int(n) for n in seen], "grads": grads}


# ---- 09.5 ---------------------------------------------------------------------------------


def _loader_reading(run: job_memory.LoaderRun, rows: list[int]) -> dict:
    return {
        "batches": run.batches,
        "checksum": run.checksum,
        "own_mib": [p.unshared / job_memory.MiB for p in run.workers],
        "rows": max(rows, default=0),
        "batch_bytes": max(rows, default=0) * int(np.prod(SHARED_LOADER_SHAPE)),
    }


@probe("09.5")
def measure_loader(shared_loader, workers_memory, seed: int, mib: int, workers: int):
    """The learner's loader over a file written at the check's seed, measured by their
    `workers_memory(loader)` with job_memory.read_loader watched: what that reading found."""
    readings = []
    with tempfile.TemporaryDirectory(prefix="check-09.5-") as tmp:
        path = job_memory.write_images(Path(tmp) / "images.npy", mib, SHARED_LOADER_SHAPE, seed)
        loader = shared_loader(str(path), workers)
        if type(loader) is not DataLoader:
            return {"loader": type(loader).__name__}
        length, yours = len(loader), [loader]

        def watch(real, some_loader, batches=None, on_batch=None):
            rows = []

            def look(b):
                rows.append(len(b) if isinstance(b, torch.Tensor) else 0)
                if on_batch is not None:
                    on_batch(b)

            run = real(some_loader, batches, on_batch=look)
            reading = {**_loader_reading(run, rows), "yours": any(some_loader is y for y in yours)}
            readings.append(reading)
            return run

        with watching(job_memory, "read_loader", watch):
            reported = workers_memory(loader)
        yours.clear()
        del loader  # its workers end before the file goes
    return {"loader": "DataLoader", "length": length, "reported": reported, "readings": readings}
