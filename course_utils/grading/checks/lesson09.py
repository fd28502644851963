"""Checkers of lesson 09, when jobs fail.

09.1 reads real logs: the runs recorded in lesson09_runs/ (made by `record_runs`, below, with
the course's faulty_ddp under torchrun) and those the learner's notebook just made, each with
the truth its program wrote. 09.2 runs the learner's function on real forked ranks (gloo)
under a timeout. 09.3 reads a batch script with the rules of failures.batch_script_problems
(tests/integration/test_failures_slurm.py submits the lesson's broken and repaired scripts to
a real Slurm). 09.4 compares gradients with one backward over the whole batch.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn

from course_utils import failures, memory, sbatch
from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out

RECORDED_RUNS = Path(__file__).with_name("lesson09_runs")
RECORDED_FAULTS = [(fault, rank) for fault in failures.CAUSES for rank in (0, 1)]


def record_runs(destination=RECORDED_RUNS) -> None:
    """Provoke every fault on rank 0 and on rank 1 and keep each log with its truth:
    python -c "from course_utils.grading.checks.lesson09 import record_runs; record_runs()" """
    destination = Path(destination)
    with tempfile.TemporaryDirectory() as tmp:
        for fault, rank in RECORDED_FAULTS:
            debug = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"} if fault == "mismatch" else {}
            failures.provoke(fault, Path(tmp) / f"rank{rank}", faulty_rank=rank, env=debug)
            target = destination / f"{fault}-rank{rank}"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(Path(tmp) / f"rank{rank}" / fault, target)


def _runs(folder) -> list[failures.FailureRun]:
    runs = failures.load_runs(RECORDED_RUNS)
    if folder is not None:
        runs += failures.load_runs(folder)
    return runs


def _hint(run: failures.FailureRun, rank) -> str:
    if rank == failures.root_cause_rank(run.output) and rank != run.faulty_rank:
        return (
            ": torchrun's 'Root Cause' is the first rank to exit with an error, which in a hang "
            "or a missing rank is one that waited; look for the rank that raised nothing"
        )
    return ""


@exercise("09.1", "name the failing rank and the cause from a job's log")
def check_diagnose(diagnose, runs_folder=None):
    causes = sorted(set(failures.CAUSES.values()))
    runs = _runs(runs_folder)
    expect(bool(runs), "the course's recorded runs", "none (is the package installed whole?)")
    for run in runs:
        got = call_answer(diagnose, run.output)
        what = f"the log of run {run.name!r}"
        expect(isinstance(got, tuple) and len(got) == 2, "a tuple (rank, cause)", repr(got), what)
        rank, cause = got
        cause = cause.strip().lower() if isinstance(cause, str) else cause
        expect(cause in causes, f"a cause among {causes}", repr(got[1]), what)
        want = (run.faulty_rank, run.cause)
        expect((rank, cause) == want, want, f"{(rank, cause)}{_hint(run, rank)}", what)
    return "named the failing rank and the cause in every log: the course's and this notebook's"


def _mean_loss_on_ranks(log_mean_loss, world_size: int) -> list:
    """Each rank's loss is rank + 1; every rank calls the answer, as a training loop would."""
    return failures.run_ranks(
        lambda rank, size: log_mean_loss(float(rank + 1), rank, size), world_size, timeout=3.0
    )


@exercise("09.2", "repair a step that hangs: a collective on every rank")
def check_log_mean_loss(log_mean_loss):
    expect(callable(log_mean_loss), "a function", type(log_mean_loss).__name__)
    for world_size in (2, 3):
        try:
            got = _mean_loss_on_ranks(log_mean_loss, world_size)
        except failures.RanksFailed as e:
            raise CheckFailed(
                f"{world_size} ranks: expected every rank to finish within 3 s, got {e}. Every "
                "rank must call the same collectives in the same order: all_reduce on every "
                "rank, then only rank 0 uses the result"
            ) from None
        want = [(1 + world_size) / 2] + [None] * (world_size - 1)
        ok = got[1:] == want[1:] and isinstance(got[0], float) and math.isclose(got[0], want[0])
        expect(ok, want, got, f"{world_size} ranks with losses 1..{world_size}")
    return "every rank calls all_reduce; rank 0 returns the mean (real gloo ranks, within 3 s)"


@exercise("09.3", "repair a batch script that hangs at start-up")
def check_repaired_script(repaired_script):
    got = call_answer(repaired_script, failures.BROKEN_BATCH_SCRIPT)
    expect(isinstance(got, str), "the repaired script as a str", type(got).__name__)
    problems = failures.batch_script_problems(got)
    expect(not problems, "no problem left", problems[0] if problems else "")
    tasks = sbatch.read_request(got).tasks
    expect(tasks == 2, "2 tasks, as before (--ntasks-per-node=2 on 1 node)", f"{tasks} tasks")
    srun = [line for line in got.splitlines() if line.lstrip().startswith("srun ")]
    expect(
        len(srun) == 1 and "course_utils.jobs.faulty_ddp" in srun[0],
        "one srun line that starts python -m course_utils.jobs.faulty_ddp",
        srun or "no srun line",
    )
    return "every #SBATCH line is read, srun starts one task per rank, each reads its own rank"


def _recording_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    seen = []
    model.register_forward_pre_hook(lambda module, args: seen.append(len(args[0])))
    return model, seen


@exercise("09.4", "gradient accumulation that matches the big batch")
def check_accumulate_gradients(accumulate_gradients):
    g = torch.Generator().manual_seed(0)
    for rows, micro_batches in ((12, 4), (10, 4)):  # 10 rows: chunks of 3, 3, 3 and 1
        x, y = torch.randn(rows, 3, generator=g), torch.randn(rows, 2, generator=g)
        model, _ = _recording_model()
        nn.functional.mse_loss(model(x), y).backward()
        want = memory.gradients(model)
        model, seen = _recording_model()
        call_answer(accumulate_gradients, model, x, y, micro_batches)
        what = f"{rows} rows in {micro_batches} micro-batches"
        largest = math.ceil(rows / micro_batches)
        expect(bool(seen) and max(seen) <= largest, f"batches of at most {largest} rows",
               f"batches of {seen}", what)  # fmt: skip
        expect(sum(seen) == rows, f"all {rows} rows used once", f"{sum(seen)} rows", what)
        grads = [p.grad for p in model.parameters()]
        expect(all(gr is not None for gr in grads), "a .grad on every parameter", "None", what)
        worst = memory.max_relative_difference(grads, want)
        expect(worst < 1e-5, "the big batch's gradients (relative difference < 1e-5)",
               f"a relative difference of {worst:.2g}; weight each micro-batch's mean loss by "
               "its share of the rows (len(chunk) / len(inputs))", what)  # fmt: skip
    return "micro-batch gradients add up to the big batch's, uneven last chunk included"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("09.4", cases=3)
def held_out_accumulate_gradients(rng, accumulate_gradients):
    """Other batch sizes, each split unevenly: chunks that happen to be even on the visible
    sizes (12 rows in 4, 10 in 4), weighted equally, fail them."""
    micro_batches = rng.randint(2, 5)
    rows = micro_batches * rng.randint(micro_batches, 6) + rng.randint(1, micro_batches - 1)
    g = torch.Generator().manual_seed(rng.randrange(2**31))
    x, y = torch.randn(rows, 3, generator=g), torch.randn(rows, 2, generator=g)
    model, _ = _recording_model()
    nn.functional.mse_loss(model(x), y).backward()
    want = memory.gradients(model)
    model, seen = _recording_model()
    call_answer(accumulate_gradients, model, x, y, micro_batches)
    what = f"{rows} rows in {micro_batches} micro-batches"
    expect(sum(seen) == rows, f"all {rows} rows used once", f"{sum(seen)} rows", what)
    grads = [p.grad for p in model.parameters()]
    expect(all(gr is not None for gr in grads), "a .grad on every parameter", "None", what)
    worst = memory.max_relative_difference(grads, want)
    expect(worst < 1e-5, "the big batch's gradients", f"a relative difference of {worst:.2g}", what)
