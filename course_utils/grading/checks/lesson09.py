"""Checkers of lesson 09, when jobs fail.

09.1 (code) reads real logs: the course's recorded runs of faulty_ddp under torchrun
(failures.RECORDED_RUNS, re-recorded by lesson09_references.record_runs) and those the
learner's notebook just made (read by a probe from their folder), each with the truth its
program wrote.
09.2 (run): the learner's `run_step(losses)` runs their repaired step on real forked gloo ranks
(launching.run_ranks) at losses the check draws; the check reads what each rank returned and,
from each rank's flight record, the collectives it entered.
09.3 (run): the learner's repaired script is read as sbatch reads it (failures.
batch_script_problems, a --time of at most 5 minutes), then their `run_repaired` runs it: submitted
where Slurm answers, else its program on local ranks (batch.local_run), with a seed the check
draws. Every rank must print the parameter sum the check computes itself for that seed; on Slurm
the scheduler's record (sacct) must show the job COMPLETED with a step of the 2 tasks it asked for.
09.4 (code) compares gradients with one backward over the whole batch.
09.5 (run): the learner's `workers_memory` measures their loader with job_memory.read_loader over
a file written at the check's seed; the check holds the reading against the file's own sum and
against its own reading of a loader that shares the same file.
The probes are in probes/lesson09.py, the judge's own runs in lesson09_references.py.
"""

from __future__ import annotations

import math
import random

import torch

from course_utils.failing import failures, memory
from course_utils.grading import (
    CheckFailed,
    NotAttempted,
    call_answer,
    exercise,
    expect,
    held_out,
    run_probe,
)
from course_utils.grading.checks import lesson09_references as references
from course_utils.grading.checks import slurm_record
from course_utils.grading.probes import lesson09 as probes

# ---- 09.1 ---------------------------------------------------------------------------------


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
    runs = failures.load_runs(failures.RECORDED_RUNS)
    expect(bool(runs), "the course's recorded runs", "none (is the package installed whole?)")
    if runs_folder is not None:
        for found in run_probe(probes.notebook_runs, runs_folder):
            truth = found["truth"]
            runs.append(failures.FailureRun(found["name"], found["output"], -1, 0.0, truth))
    for run in runs:
        got = call_answer(diagnose, run.output)
        what = f"the log of run {run.name!r}"
        pair = type(got) in (tuple, list) and len(got) == 2
        expect(pair, "a tuple (rank, cause)", repr(got), what)
        rank, cause = got
        expect(type(rank) is int, "the rank as an int", repr(rank), what)
        expect(type(cause) is str, "the cause as a str", repr(cause), what)
        cause = cause.strip().lower()
        expect(cause in causes, f"a cause among {causes}", repr(got[1]), what)
        want = (run.faulty_rank, run.cause)
        expect((rank, cause) == want, want, f"{(rank, cause)}{_hint(run, rank)}", what)
    return "named the failing rank and the cause in every log: the course's and this notebook's"


# ---- 09.2 ---------------------------------------------------------------------------------

LOSS_RANKS = (2, 3)  # two runs: a step right for 2 ranks only (a mean over 2) fails on 3


def _losses(world_size: int, rng: random.Random) -> list[float]:
    return [round(rng.uniform(0.5, 9.5), 3) for _ in range(world_size)]


def _judge_loss_run(run: dict, losses: list[float]) -> None:
    world_size, what = len(losses), f"{len(losses)} ranks with losses the check drew"
    expect(
        "failed" not in run,
        "every rank to finish within the run's timeout",
        f"{run.get('failed')}. Every rank must call the same collectives in the same order: "
        "all_reduce on every rank, then only rank 0 uses the result",
        what,
    )
    ranks = run["ranks"]
    pids = {r["pid"] for r in ranks}
    expect(
        len(ranks) == world_size and len(pids) == world_size and run["parent"] not in pids,
        f"{world_size} ranks, each a process of its own",
        f"{len(ranks)} results from {len(pids)} processes",
        what,
    )
    entered = [r["collectives"] for r in ranks]
    if entered[0] is not None:  # this PyTorch keeps a flight record for gloo
        expect(
            all(entered) and all(e == entered[0] for e in entered),
            "every rank entering the same collectives (all_reduce), as its flight record shows",
            f"{dict(enumerate(entered))}: the mean must come from the ranks, through a "
            "collective every rank calls",
            what,
        )
    got, want = run["returned"], sum(losses) / world_size
    mean = got[0]
    right = type(mean) is float and math.isclose(mean, want, rel_tol=1e-5)
    others = all(r is None for r in got[1:])
    expect(
        right and others,
        f"[{want:.4f}] + [None] * {world_size - 1} (the mean on rank 0, None elsewhere)",
        repr(got),
        what,
    )


@exercise("09.2", "repair a step that hangs: a collective on every rank, run on real ranks")
def check_run_step(run_step, draw=None):
    """`run_step(losses)` runs the learner's step on len(losses) real ranks (run_ranks) and
    returns what each rank returned; `draw` (a random.Random) picks the losses (tests)."""
    rng = draw or random.Random()  # fresh losses at each check: a table of answers cannot match
    for world_size in LOSS_RANKS:
        losses = _losses(world_size, rng)
        report = run_probe(probes.run_step_on_ranks, run_step, losses=losses)
        runs = report["runs"]
        if not runs:
            if report["returned"] is None:
                raise NotAttempted(
                    "run your step on real ranks first: run_step(losses) runs log_mean_loss "
                    "with launching.run_ranks and returns what it returned"
                )
            raise CheckFailed(
                f"{world_size} ranks: expected a run of launching.run_ranks, got "
                f"{report['returned']!r} with no ranks started: run the step on real ranks"
            )
        run = runs[-1]
        if "failed" not in run:
            expect(
                report["returned"] == run["returned"],
                "what launching.run_ranks returned",
                repr(report["returned"]),
                f"{world_size} ranks",
            )
        _judge_loss_run(run, losses)
    return (
        "your run: every rank called the collective and finished; rank 0 returned the mean of "
        "the losses the check drew, on 2 and on 3 real ranks"
    )


# ---- 09.3 ---------------------------------------------------------------------------------


@exercise(
    "09.3",
    "repair a batch script that hangs at start-up, and run it",
    allows=("opens or removes files",),
    reference=(r"trained_sum\(", r"lesson09_references"),
)
def check_repaired_script(repaired_script, run_repaired, jobs=None, seed=None):
    got = call_answer(repaired_script, failures.BROKEN_BATCH_SCRIPT)
    references.check_script(got)
    named = slurm_record.named_jobs(jobs.value() if jobs is not None else None, "REPAIRED_JOBS")
    if named:
        for job_id in named:
            references.repaired_job_in_sacct(job_id, got)
        return REPAIRED_PASSED
    slurm_record.needs_a_job("09.3", "sbatch --parsable your repaired script --seed N")
    seed = random.randrange(1, 10**6) if seed is None else seed
    ran = run_probe(probes.run_the_job, run_repaired, script=got, seed=seed)
    if ran is None:
        raise NotAttempted(
            "run your repaired script first: run_repaired must return the job that "
            "batch.submit or batch.local_run gave it"
        )
    expect(
        ran["started"],
        "the job batch.submit or batch.local_run returned",
        f"a {ran.get('kind')} that no run of theirs made",
    )
    tail = "\n".join(ran["output"].splitlines()[-6:])
    expect(ran["returncode"] == 0, "the job to end well", f"exit code {ran['returncode']}: {tail}")
    if ran["route"] == "local":
        expect(
            ran["module"] == failures.PROGRAM and (ran["nodes"], ran["ranks"]) == (1, 2),
            f"{failures.PROGRAM} on 1 node x 2 ranks, as the script asks",
            f"{ran['module']} on {ran['nodes']} x {ran['ranks']}",
        )
    else:
        expect(ran["script"] == got, "your repaired script submitted", "another script")
    sums, want = references.rank_sums(ran["output"]), references.trained_sum(seed, world_size=2)
    expect(
        sorted(sums) == [0, 1],
        "ranks 0 and 1 each printing 'rank R: finished, seed S, parameter sum X'",
        f"those lines from ranks {sorted(sums)}: {tail}",
    )
    for rank, (used, total) in sorted(sums.items()):
        expect(
            used == seed,
            f"rank {rank} trained from the check's seed (passed as --seed)",
            f"seed {used}: pass the script's arguments on to the program",
        )
        expect(
            abs(total - want) < 1e-4,
            f"rank {rank}'s parameter sum after 3 steps of 2 ranks at that seed, {want:.6f}",
            f"{total:.6f}",
        )
    if ran["route"] == "slurm":
        references.scheduler_says(ran["job_id"], tasks=2)
    slurm_record.note(f"your job run by your function ({ran['route']}) at the judge's seed")
    return REPAIRED_PASSED


# One line wherever the job ran (nbval compares it): the evidence column says which route.
REPAIRED_PASSED = (
    "every #SBATCH line is read, --time at most 5 minutes, srun starts one task per rank; "
    "your job ran and both ranks trained together from the check's seed"
)


# ---- 09.4 ---------------------------------------------------------------------------------


def _judge_accumulation(accumulate_gradients, rows: int, micro_batches: int, seed: int) -> None:
    want = references.big_batch_gradients(rows, seed)
    got = run_probe(
        probes.accumulate, accumulate_gradients, rows=rows, micro_batches=micro_batches, seed=seed
    )
    seen, grads = got["seen"], got["grads"]
    what = f"{rows} rows in {micro_batches} micro-batches"
    largest = math.ceil(rows / micro_batches)
    expect(
        bool(seen) and max(seen) <= largest,
        f"batches of at most {largest} rows",
        f"batches of {seen}",
        what,
    )
    expect(sum(seen) == rows, f"all {rows} rows used once", f"{sum(seen)} rows", what)
    expect(all(type(g) is torch.Tensor for g in grads), "a .grad on every parameter", "None", what)
    worst = memory.max_relative_difference(grads, want)
    expect(
        worst < 1e-5,
        "the big batch's gradients (relative difference < 1e-5)",
        f"a relative difference of {worst:.2g}; weight each micro-batch's mean loss by "
        "its share of the rows (len(chunk) / len(inputs))",
        what,
    )


@exercise(
    "09.4",
    "gradient accumulation that matches the big batch",
    reference=(r"accumulation_step\(",),
)
def check_accumulate_gradients(accumulate_gradients):
    for seed, (rows, micro_batches) in enumerate(((12, 4), (10, 4))):  # 10 rows: 3, 3, 3 and 1
        _judge_accumulation(accumulate_gradients, rows, micro_batches, seed)
    return "micro-batch gradients add up to the big batch's, uneven last chunk included"


# ---- 09.5 ---------------------------------------------------------------------------------

SHARED_LOADER_MIB = 64  # the check's file: a copy per worker stands far above the workers' own
SHARED_LOADER_WORKERS = 2  # heap (about 10 MiB each, batches included)
OWN_SLACK_MIB = 16  # a worker's own memory may exceed the judge's sharing loader's by this much


def _reading(report: dict) -> dict:
    if report["reported"] is None:
        raise NotAttempted(
            "run your loader first: workers_memory(loader) reads it with "
            "job_memory.read_loader and returns what that reading measured"
        )
    yours = [r for r in report["readings"] if r["yours"]]
    expect(
        bool(yours),
        "your loader read by job_memory.read_loader (the course's measurement)",
        f"{report['reported']!r} with no reading of your loader",
    )
    return yours[-1]


def judge_shared_loader(report: dict, own: dict, file_sum: int, workers: int) -> None:
    """CheckFailed unless the learner's reading is what it reports, covers the file's images as
    stored, and finds no worker holding much more than the judge's own sharing loader."""
    reading = _reading(report)
    reported = report["reported"]
    what = f"{workers} workers on a {SHARED_LOADER_MIB} MiB file"
    expect(
        type(reported) is dict and type(reported.get("own_mib")) is list,
        "a dict with 'own_mib' (each worker's own MiB) and 'checksum', from the reading",
        repr(reported)[:200],
    )
    own_mib = reported["own_mib"]
    same = len(own_mib) == len(reading["own_mib"]) and all(
        type(m) in (int, float) and abs(m - r) < 0.5 for m, r in zip(own_mib, reading["own_mib"])
    )
    expect(same, f"what read_loader measured, {reading['own_mib']}", own_mib, "'own_mib'")
    expect(
        reported.get("checksum") == reading["checksum"],
        "read_loader's checksum",
        repr(reported.get("checksum")),
        "'checksum'",
    )
    expect(
        len(reading["own_mib"]) == workers,
        f"{workers} workers reading",
        f"{len(reading['own_mib'])}",
        "the loader's processes while it read",
    )
    expect(
        reading["batches"] == report["length"] and reading["checksum"] == file_sum,
        "one whole epoch of the file's images as stored (uint8, 3 x 64 x 64)",
        f"{reading['batches']} of {report['length']} batches, with other values",
        "the reading",
    )
    limit = max(own["own_mib"]) + OWN_SLACK_MIB
    worst = max(reading["own_mib"])
    expect(
        worst < limit,
        f"each worker holding about what the check's own sharing loader's workers held "
        f"(under {OWN_SLACK_MIB} MiB more)",
        f"{[round(m) for m in reading['own_mib']]} MiB: each worker holds a copy of the "
        f"{SHARED_LOADER_MIB} MiB file. Map it (np.load(path, mmap_mode='r'), opened in each "
        "worker) or load it once in the main process before the workers start, so they read "
        "the same pages",
        what,
    )


@exercise("09.5", "DataLoader workers that share the data set instead of copying it, measured")
def check_shared_loader(shared_loader, workers_memory, seed=None):
    seed = random.randrange(1, 10**6) if seed is None else seed
    workers, mib = SHARED_LOADER_WORKERS, SHARED_LOADER_MIB
    report = run_probe(
        probes.measure_loader, shared_loader, workers_memory, seed=seed, mib=mib, workers=workers
    )
    expect(report["loader"] == "DataLoader", "a torch.utils.data.DataLoader", report["loader"])
    reading = _reading(report)
    own = references.own_loader_reading(seed, mib, workers, reading["rows"])
    judge_shared_loader(report, own, references.file_sum(seed, mib), workers)
    return (
        f"your reading: {workers} workers read the whole file, and none held a copy of the "
        f"{mib} MiB file (held against the check's own reading of a loader that shares it)"
    )


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("09.4", cases=3)
def held_out_accumulate_gradients(rng, accumulate_gradients):
    """Other batch sizes, each split unevenly: chunks that happen to be even on the visible
    sizes (12 rows in 4, 10 in 4), weighted equally, fail them."""
    micro_batches = rng.randint(2, 5)
    rows = micro_batches * rng.randint(micro_batches, 6) + rng.randint(1, micro_batches - 1)
    _judge_accumulation(accumulate_gradients, rows, micro_batches, rng.randrange(2**31))
