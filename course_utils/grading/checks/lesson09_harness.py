"""Lesson 09's probes, and the judge's own runs of the same things.

A probe runs in the learner's process (grading/answers.py) and returns plain data. Those of the
run exercises watch the course's own function that the learner's code must call, by replacing
it for the length of the call with one that calls the real one and notes what it started and
what it gave back (`watching`): the ranks of `launching.run_ranks` (09.2, each rank's flight
record of the collectives it entered), the job of `batch.submit` or `batch.local_run` (09.3),
the reading of `job_memory.read_loader` (09.5). What a learner's function returns counts only
when it is what that real call returned.

The judge's own material: the runs the course recorded for 09.1 (`record_runs`), the
scheduler's record of a job (`scheduler_says`, sacct). The judge's side (checks/lesson09.py)
recomputes what a run must show from the inputs it drew:
`trained_sum` is a healthy faulty_ddp run done again in one process (each rank's gradients,
averaged), `file_sum` the sum of the images written at a seed, `own_loader_reading` the judge's
own DataLoader over its own copy of the same file, read and measured as the learner's was.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
import tempfile
import unittest.mock
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils import accounting, batch, failures, job_memory, launching, memory, paths
from course_utils.files import atomic_write_text
from course_utils.grading import expect, probe

RECORDED_RUNS = Path(__file__).with_name("lesson09_runs")
RECORDED_FAULTS = [(fault, rank) for fault in failures.CAUSES for rank in (0, 1)]

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


def record_runs(destination=RECORDED_RUNS) -> None:
    """Provoke every fault on rank 0 and on rank 1 and keep each log with its truth, paths
    written as a learner reads them on their own copy (paths.as_learner_sees):
    python -c "from course_utils.grading.checks.lesson09_harness import record_runs; record_runs()"
    """
    destination = Path(destination)
    with tempfile.TemporaryDirectory() as tmp:
        for fault, rank in RECORDED_FAULTS:
            debug = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"} if fault == "mismatch" else {}
            failures.provoke(fault, Path(tmp) / f"rank{rank}", faulty_rank=rank, env=debug)
            target = destination / f"{fault}-rank{rank}"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(Path(tmp) / f"rank{rank}" / fault, target)
            for log in (target / "output.log", target / "stacks.json"):
                if log.is_file():
                    text = log.read_text().replace(f"{tmp}/", "runs/09/")
                    atomic_write_text(log, paths.as_learner_sees(text))


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
    from course_utils import flight_recorder

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


def rank_sums(output: str) -> dict[int, tuple[int, float]]:
    """rank -> (seed, parameter sum) from a faulty_ddp job's "rank R: finished, ..." lines."""
    found = re.findall(r"rank (\d+): finished, seed (\d+), parameter sum (-?[\d.]+)", output)
    return {int(rank): (int(seed), float(total)) for rank, seed, total in found}


def scheduler_says(job_id, tasks: int) -> None:
    """The judge reads the scheduler's own record of the learner's job: COMPLETED, with a step
    (srun's) of `tasks` tasks."""
    steps = accounting.ended_job_steps(str(job_id))
    expect(bool(steps), f"sacct's record of job {job_id}", "none (is accounting on?)")
    job = next((s for s in steps if not s.is_step), None)
    state = job.state if job else "no job line"
    expect(state == "COMPLETED", f"job {job_id} COMPLETED in sacct", state)
    counts = [s.tasks for s in steps if s.is_step and s.job_id.split(".")[-1].isdigit()]
    expect(tasks in counts, f"a step of {tasks} tasks (srun) in sacct", f"steps of {counts} tasks")


def trained_sum(seed: int, world_size: int, steps: int = 3, rows: int = 32) -> float:
    """The parameter sum every rank of a healthy faulty_ddp run at `seed` on `world_size` ranks
    prints: the same steps in one process, each rank's gradient on its own batch, averaged."""
    torch.manual_seed(seed)
    model = nn.Linear(16, 1)
    for step in range(1, steps + 1):
        grads = []
        for rank in range(world_size):
            generator = torch.Generator().manual_seed(failures.batch_seed(seed, step, rank))
            x = torch.empty(rows, 16).normal_(generator=generator)
            model.zero_grad()
            model(x).pow(2).mean().backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                total = grads[0][i].clone()
                for other in grads[1:]:
                    total += other[i]
                p -= failures.LEARNING_RATE * (total / world_size)
    return failures.parameter_sum(model)


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


def big_batch_gradients(rows: int, seed: int) -> list[torch.Tensor]:
    """The judge's own: one backward over the whole batch."""
    x, y = accumulation_batch(rows, seed)
    model, _ = recording_model()
    nn.functional.mse_loss(model(x), y).backward()
    return memory.gradients(model)


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


def file_sum(seed: int, mib: int) -> int:
    """The sum of every value of the file 09.5's probe writes at `seed` (the judge's own copy)."""
    with tempfile.TemporaryDirectory(prefix="judge-09.5-") as tmp:
        path = job_memory.write_images(Path(tmp) / "images.npy", mib, SHARED_LOADER_SHAPE, seed)
        return int(np.load(path, mmap_mode="r").sum(dtype=np.int64))


def own_loader_reading(seed: int, mib: int, workers: int, rows: int) -> dict:
    """The judge's own reading of the same thing: the same file, workers and batch size, read
    by a loader that shares the file (each worker maps it), measured by the same helper."""
    with tempfile.TemporaryDirectory(prefix="judge-09.5-") as tmp:
        path = job_memory.write_images(Path(tmp) / "images.npy", mib, SHARED_LOADER_SHAPE, seed)
        images = job_memory.ImageFile(path, mmap=True)
        loader = DataLoader(images, batch_size=max(1, rows), num_workers=workers)
        seen = []
        run = job_memory.read_loader(loader, on_batch=lambda b: seen.append(len(b)))
        del loader
    return _loader_reading(run, seen)
