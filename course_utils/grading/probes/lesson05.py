"""Lesson 05's probes: the learner's train_ddp on real ranks, and 05.3's job.

A probe runs in the learner's process (judge/proxies.py) and returns plain data. Both write
the learner's `train_ddp` into a module of its own (its source and the imports its names need),
which every rank of `course_utils.jobs.ddp_exercise` loads, at the seed the judge drew: 05.1 on
2 ranks forked here (`batch.local_run`, torchrun's variables), 05.3 under the learner's header
with slurm/ddp_srun.sh's commands, submitted where Slurm answers (`batch.submit`), else on 2
emulated nodes here. What comes back: how the run ended, the ranks' lines, and rank 0's
parameters as plain tensors; the judge (checks/lesson05.py) decides from them.
"""

from pathlib import Path

import torch

from course_utils import batch, ddp_jobs, notebook_code
from course_utils.grading import CheckFailed, NotAttempted, probe

RUNS = "runs/05"  # beside the notebook, as every file a lesson writes
RUN_TIMEOUT = 100  # seconds for a local run of the ranks (the check cell's limit is 120)
JOB_WAIT = 300  # seconds a submitted job may take, queue included


def _answer_module(train_ddp, folder: Path) -> Path:
    """`train_ddp`'s source as a module the ranks load (in the learner's process)."""
    if not callable(train_ddp):
        raise CheckFailed(f"expected a function train_ddp, got {type(train_ddp).__name__}")
    if notebook_code.is_stub(train_ddp):
        raise NotAttempted("run exercise 05.1 first (write train_ddp): the ranks run it")
    try:
        return ddp_jobs.answer_module(train_ddp, folder)
    except ValueError as e:
        raise CheckFailed(str(e)) from e


def _evidence(job: batch.Job, saved: Path) -> dict:
    """What the judge gets of a run: how it ended, the ranks' lines, rank 0's parameters."""
    state = torch.load(saved, weights_only=True) if saved.exists() else None
    return {
        "launcher": job.launcher,
        "returncode": job.returncode,
        "output": job.output[-20000:],
        "job_id": job.job_id,
        "state": dict(state) if isinstance(state, dict) else None,
    }


def _prepare(train_ddp, exercise_id: str, seed: int) -> tuple[list, Path]:
    """The program's arguments for a run of `train_ddp` at `seed`, and where rank 0 saves."""
    folder = Path(RUNS).resolve()
    answer, saved = _answer_module(train_ddp, folder), folder / f"{exercise_id}-rank0.pt"
    saved.unlink(missing_ok=True)
    return ["--answer", answer, "--seed", seed, "--save", saved], saved


def _local_run(args: list, saved: Path, name: str, shape: batch.Shape) -> dict:
    job = batch.local_run(name, "course_utils.jobs.ddp_exercise", args, shape, timeout=RUN_TIMEOUT)
    return _evidence(job, saved)


@probe("05.1")
def run_on_two_ranks(train_ddp, seed: int):
    """In the learner's process: their train_ddp on 2 ranks of one node."""
    args, saved = _prepare(train_ddp, "05.1", seed)
    return _local_run(args, saved, "05.1", batch.Shape(1, 2))


@probe("05.3")
def run_the_job(train_ddp, header: str, seed: int, name: str, nodes: int, per_node: int):
    """In the learner's process: the header and ddp_srun.sh's commands, submitted where Slurm
    answers (else the same ranks here, on emulated nodes), running their train_ddp."""
    args, saved = _prepare(train_ddp, "05.3", seed)  # one file each, however often it runs
    if batch.find_launcher().kind != "slurm":
        return _local_run(args, saved, name, batch.Shape(nodes, per_node))
    script = saved.parent / "05.3-job.sh"
    script.write_text(ddp_jobs.job_script(header))
    program = ["-m", "course_utils.jobs.ddp_exercise", *args]
    job = batch.submit(script, program, name=name, logs=saved.parent, timeout=JOB_WAIT)
    return _evidence(job, saved)
