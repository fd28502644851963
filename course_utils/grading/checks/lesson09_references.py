"""Lesson 09's references: the judge's own runs and readings, and the course's recorded runs.

`trained_sum` is what every rank of a healthy faulty_ddp run prints (09.3), `big_batch_gradients`
one backward over the whole batch (09.4), `file_sum` and `own_loader_reading` the judge's own
reading of 09.5's file and loader; `scheduler_says` reads sacct's record of a job; `record_runs`
re-records the logs lesson 09 shows (failures.RECORDED_RUNS).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils import accounting, paths, sbatch
from course_utils.failing import failures, job_memory, memory
from course_utils.files import atomic_write_text
from course_utils.grading import CheckFailed, expect
from course_utils.grading.checks import slurm_record
from course_utils.grading.probes.lesson09 import (
    SHARED_LOADER_SHAPE,
    _loader_reading,
    accumulation_batch,
    recording_model,
)
from course_utils.models import parameter_sum


def record_runs(destination=failures.RECORDED_RUNS) -> None:
    """Provoke every fault on rank 0 and on rank 1 and keep each log with its truth, paths
    written as a learner reads them on their own copy (paths.as_learner_sees):
    python -c "from course_utils.grading.checks import lesson09_references as r; r.record_runs()"
    """
    destination = Path(destination)
    with tempfile.TemporaryDirectory() as tmp:
        for fault, rank in failures.RECORDED_FAULTS:
            debug = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"} if fault == "mismatch" else {}
            failures.provoke(fault, Path(tmp) / f"rank{rank}", faulty_rank=rank, env=debug)
            target = destination / f"{fault}-rank{rank}"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(Path(tmp) / f"rank{rank}" / fault, target)
            for log in (target / "output.log", target / "stacks.json"):
                if log.is_file():
                    text = log.read_text().replace(f"{tmp}/", "runs/09/")
                    atomic_write_text(log, paths.as_learner_sees(text))


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
    return parameter_sum(model)


def big_batch_gradients(rows: int, seed: int) -> list[torch.Tensor]:
    """The judge's own: one backward over the whole batch."""
    x, y = accumulation_batch(rows, seed)
    model, _ = recording_model()
    nn.functional.mse_loss(model(x), y).backward()
    return memory.gradients(model)


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


def repaired_job_in_sacct(job_id: str, script: str) -> None:
    """A job the learner names: theirs, for the course, their repaired script as Slurm stored
    it, COMPLETED with a step of 2 tasks, and the parameter sum it left in its record (the
    program writes it there) the one the judge computes at the seed it was submitted with."""
    record = slurm_record.learner_job(job_id, "09.3")
    what = f"job {job_id}"
    stored = (record.script or "").strip()
    expect(stored == script.strip(), "your repaired script, as Slurm stored it", "another", what)
    scheduler_says(job_id, tasks=2)
    missing = "no result (did rank 0 finish?)"
    seed, total = slurm_record.seeded_sum(record, "the program", missing, what)
    want = trained_sum(seed, world_size=2)
    expect(
        abs(float(total) - want) < 1e-4,
        f"the parameter sum of 3 steps of 2 ranks at seed {seed}, {want:.6f}",
        total,
        what,
    )
    slurm_record.note(slurm_record.sacct_evidence(record) + ", its result reproduced")


MAX_MINUTES = 5  # the exercise asks for a --time of 5 minutes


SEED_WORDS = '"$@"'  # how a batch script passes its own arguments on


def check_script(got) -> None:
    expect(type(got) is str, "the repaired script as a str", type(got).__name__)
    problems = failures.batch_script_problems(got)
    expect(not problems, "no problem left", problems[0] if problems else "")
    try:
        request = sbatch.read_request(got)
    except ValueError as e:
        raise CheckFailed(f"expected a header sbatch can read, got: {e}") from None
    expect(
        request.tasks == 2 and request.nodes == 1,
        "2 tasks on 1 node, as before (--ntasks-per-node=2)",
        f"{request.tasks} tasks on {request.nodes} node(s)",
    )
    minutes = request.minutes
    expect(
        minutes is not None and 0 < minutes <= MAX_MINUTES,
        f"a --time of at most {MAX_MINUTES} minutes (00:05:00): a hung job holds its node no "
        "longer than it needs",
        "no --time" if minutes is None else f"--time={request.options['--time']}",
    )
    srun = [line for line in got.splitlines() if line.lstrip().startswith("srun ")]
    expect(
        len(srun) == 1 and "course_utils.jobs.faulty_ddp" in srun[0],
        "one srun line that starts python -m course_utils.jobs.faulty_ddp",
        srun or "no srun line",
    )
    expect(
        SEED_WORDS in srun[0],
        'the srun line passing the script\'s own arguments on ("$@"): the check submits it '
        "with --seed N",
        repr(srun[0].strip()),
    )
