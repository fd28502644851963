"""Checkers of lesson 09, when jobs fail.

09.1 reads real logs: the runs recorded in lesson09_runs/ (made by `record_runs`, below, with
the course's faulty_ddp under torchrun) and those the learner's notebook just made, each with
the truth its program wrote. 09.2 runs the learner's function on real forked ranks (gloo)
under a timeout. 09.3 reads a batch script with the rules of failures.batch_script_problems
(tests/integration/test_failures_slurm.py submits the lesson's broken and repaired scripts to
a real Slurm). 09.4 compares gradients with one backward over the whole batch. 09.5 runs the
learner's DataLoader for a whole epoch on a file of images written for the check and measures
what each worker holds of its own while it reads (job_memory.read_loader): a run here, with
workers forked from the kernel, since a job's cgroup counts the same pages (no Slurm needed;
course_utils/reference/cluster_loader_oom.json is that job, recorded on the test cluster).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils import failures, job_memory, launching, memory, paths, sbatch
from course_utils.files import atomic_write_text
from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out

RECORDED_RUNS = Path(__file__).with_name("lesson09_runs")
RECORDED_FAULTS = [(fault, rank) for fault in failures.CAUSES for rank in (0, 1)]


def record_runs(destination=RECORDED_RUNS) -> None:
    """Provoke every fault on rank 0 and on rank 1 and keep each log with its truth, paths
    written as a learner reads them on their own copy (paths.as_learner_sees):
    python -c "from course_utils.grading.checks.lesson09 import record_runs; record_runs()" """
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
    return launching.run_ranks(
        lambda rank, size: log_mean_loss(float(rank + 1), rank, size), world_size, timeout=3.0
    )


@exercise("09.2", "repair a step that hangs: a collective on every rank")
def check_log_mean_loss(log_mean_loss):
    expect(callable(log_mean_loss), "a function", type(log_mean_loss).__name__)
    for world_size in (2, 3):
        try:
            got = _mean_loss_on_ranks(log_mean_loss, world_size)
        except launching.RanksFailed as e:
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
        expect(
            bool(seen) and max(seen) <= largest,
            f"batches of at most {largest} rows",
            f"batches of {seen}",
            what,
        )
        expect(sum(seen) == rows, f"all {rows} rows used once", f"{sum(seen)} rows", what)
        grads = [p.grad for p in model.parameters()]
        expect(all(gr is not None for gr in grads), "a .grad on every parameter", "None", what)
        worst = memory.max_relative_difference(grads, want)
        expect(
            worst < 1e-5,
            "the big batch's gradients (relative difference < 1e-5)",
            f"a relative difference of {worst:.2g}; weight each micro-batch's mean loss by "
            "its share of the rows (len(chunk) / len(inputs))",
            what,
        )
    return "micro-batch gradients add up to the big batch's, uneven last chunk included"


SHARED_LOADER_MIB = 64  # the check's file: a copy per worker stands far above the workers' own
SHARED_LOADER_WORKERS = 2  # heap (about 10 MiB each, batches included)
SHARED_LOADER_SHAPE = (3, 64, 64)  # 5,461 images
SHARED_LOADER_BATCHES = 4 * SHARED_LOADER_WORKERS  # read at most: fast for any batch size


def image_fingerprints(images) -> np.ndarray:
    """One number per image: a fixed random weighting of 256 of its pixels. Two random images
    of the file never share one; an image moved, flipped or reordered does not keep its own."""
    flat = np.asarray(images).reshape(len(images), -1)
    rng = np.random.default_rng(9)
    pixels = rng.choice(flat.shape[1], 256, replace=False)
    return flat[:, pixels].astype(np.int64) @ rng.integers(1, 2**20, 256)


def judge_shared_loader(
    run: job_memory.LoaderRun, unknown: int, workers: int, batch_mib: int
) -> None:
    """CheckFailed unless every image read is one of the file's, as stored, and no worker held a
    copy of the file. unknown: how many images read were not among the file's; batch_mib: the
    size of one batch."""
    expect(
        len(run.workers) == workers,
        f"{workers} workers reading",
        f"{len(run.workers)}",
        "the loader's processes while it read",
    )
    expect(
        unknown == 0,
        "the file's images as stored (uint8, 3 x 64 x 64)",
        f"{unknown} images that are not in the file",
        "the batches",
    )
    own = [p.unshared // job_memory.MiB for p in run.workers]
    limit = SHARED_LOADER_MIB // 2 + 2 * batch_mib  # a worker builds its batches in its own memory
    expect(
        max(own) < limit,
        f"each worker under {limit} MiB of its own (half the file, and two batches it builds)",
        f"{own} MiB: each worker holds a copy of the {SHARED_LOADER_MIB} MiB file. Map it "
        "(np.load(path, mmap_mode='r'), opened in each worker) or load it once in the main "
        "process before the workers start, so they read the same pages",
        f"{workers} workers on a {SHARED_LOADER_MIB} MiB file",
    )


@exercise("09.5", "DataLoader workers that share the data set instead of copying it")
def check_shared_loader(shared_loader):
    workers, unknown, batch_bytes = SHARED_LOADER_WORKERS, [], []
    with tempfile.TemporaryDirectory(prefix="check-09.5-") as tmp:
        path = job_memory.write_images(
            Path(tmp) / "images.npy", SHARED_LOADER_MIB, SHARED_LOADER_SHAPE
        )
        known = set(image_fingerprints(np.load(path, mmap_mode="r")).tolist())

        def look(batch):
            batch_bytes.append(batch.nbytes if isinstance(batch, torch.Tensor) else 0)
            if not (
                isinstance(batch, torch.Tensor)
                and batch.dtype == torch.uint8
                and tuple(batch.shape[1:]) == SHARED_LOADER_SHAPE
            ):
                unknown.append(len(batch))
                return
            found = image_fingerprints(batch.numpy()).tolist()
            unknown.append(sum(f not in known for f in found))

        loader = call_answer(shared_loader, path, workers)
        expect(
            isinstance(loader, DataLoader), "a torch.utils.data.DataLoader", type(loader).__name__
        )
        run = job_memory.read_loader(loader, SHARED_LOADER_BATCHES, on_batch=look)
        del loader  # its workers end before the file goes
    judge_shared_loader(run, sum(unknown), workers, max(batch_bytes, default=0) // job_memory.MiB)
    return (
        f"{workers} workers read the file's images and none held a copy of the "
        f"{SHARED_LOADER_MIB} MiB file (measured here, in workers forked from this kernel; a "
        "job's cgroup counts the same pages)"
    )


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
