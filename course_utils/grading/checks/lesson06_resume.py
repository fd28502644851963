"""Checker of exercise 06.4: survive a signal and resume exactly, with the program run for real.

Graded on what only the run can produce, seen from outside the learner's kernel: the judge draws
a seed and a number of steps, makes the checkpoint folder, and calls the learner's function,
which starts `python -m course_utils.jobs.resumable_train` with them, stops it with a signal and
starts it again. Meanwhile the judge lists the processes the kernel starts (judge/outside.py), and
takes the program's own reports of each start, stop and end (course_utils.witness) only from a
process it recognises as that program, started by the kernel. The stop must name the signal,
the second run must resume from the step it saved in a new process, and the final checkpoint,
read from outside, must equal bit for bit the judge's own uninterrupted run at that seed. A
history written by the kernel, or by any other process, is not evidence.
"""

import os
import random
import re
import shutil
import tempfile

import torch

from course_utils import checkpoint as ck
from course_utils import witness
from course_utils.fault_tolerance import resumable
from course_utils.grading import CheckFailed, NotAttempted, call_answer, exercise, expect, outside
from course_utils.grading.checks import slurm_record
from course_utils.grading.checks.lesson06 import weights
from course_utils.models import TinyNet, parameter_hash

STEPS = (16, 24)  # the check draws the number of steps from this range, and a seed
SIGNALS = ("SIGUSR1", "SIGTERM")  # what Slurm sends before a time limit, and on preemption
PROGRAM_MODULE = "course_utils.jobs.resumable_train"
PROGRAM = f"python -m {PROGRAM_MODULE}"
EPOCHS, SAVE_EVERY = 3, 3  # the program's settings the lesson fixes (8 steps per epoch)


def _runs(history: list[dict]) -> str:
    """The history in a few words: 'start@0, stopped SIGUSR1@6, start@6, finished@24'."""
    words = {"start": "resumed_from", "stopped": "step", "finished": "step"}
    return ", ".join(
        f"{e.get('event')}{' ' + str(e['signal']) if 'signal' in e else ''}"
        f"@{e.get(words.get(e.get('event'), 'step'))}"
        for e in history
    )


def verify_runs(history, kernel: int, seed: int, steps: int, started=None) -> dict:
    """The checks of 06.4 on the runs' records (pure, so tests can give it records): returns
    the stop record. Every record must come from a process other than the kernel's, one of
    those seen `started` under it during the check (None: they could not be listed)."""
    expect(
        type(history) is list and all(type(e) is dict for e in history),
        f"a list of records in {resumable.HISTORY}",
        type(history).__name__,
    )
    pids = [e.get("pid") for e in history]
    expect(
        all(type(p) is int for p in pids),
        "records that carry the pid of the process that wrote them (resumable.record)",
        "a record without one",
    )
    runs = _runs(history)
    starts = [e for e in history if e.get("event") == "start"]
    for start in starts:
        config = start.get("config") if type(start.get("config")) is dict else {}
        given = {"seed": seed, "max_steps": steps, "epochs": EPOCHS}
        used = {k: config.get(k) for k in given}
        expect(
            used == given,
            f"runs with --seed {seed} --max-steps {steps} --epochs {EPOCHS} (what the check gave)",
            f"a run with {used}",
        )
    expect(
        kernel not in pids,
        f"records written by the program ({PROGRAM}) in processes of its own",
        "records written from this kernel: run the program, do not train or write them here",
    )
    expect(
        started is None or set(pids) <= set(started),
        "records written by the processes your function started during the check",
        "records of processes it did not start",
    )
    stops = [i for i, e in enumerate(history) if e.get("event") == "stopped"]
    expect(
        bool(stops) and history[stops[0]].get("signal") in SIGNALS,
        "a run stopped by a signal (SIGUSR1, as Slurm sends) that saved and exited",
        f"runs {runs} (send the signal while it trains)",
    )
    stop = history[stops[0]]
    before = [e for e in history[: stops[0]] if e.get("event") == "start"]
    expect(
        bool(before) and before[-1]["pid"] == stop["pid"],
        "the stop recorded by the run that started before it (the same process)",
        f"runs {runs}",
    )
    later = [e for e in history[stops[0] :] if e.get("event") == "start"]
    expect(
        bool(later) and later[0].get("resumed_from") == stop.get("step"),
        f"a second run that resumed from step {stop.get('step')}, where the signal saved",
        f"runs {runs}",
    )
    expect(
        later[0]["pid"] != stop["pid"],
        "the resumed run in a new process, as a requeued job starts one",
        "the same process as the stopped run",
    )
    last = history[-1]
    expect(
        last.get("event") == "finished"
        and last.get("step") == steps
        and last["pid"] == later[-1]["pid"],
        f"the resumed run to finish at step {steps}",
        f"runs {runs}",
    )
    expect(
        type(stop.get("step")) is int and 0 < stop["step"] < steps,
        f"the signal before the last step ({steps})",
        f"a stop at step {stop.get('step')}",
    )
    return stop


def draw_run(rng=None) -> tuple[int, int]:
    """A seed and a number of steps for one check: drawn each time, so no history is ready."""
    rng = rng or random.SystemRandom()
    return rng.randrange(1, 100_000), rng.randint(*STEPS)


@exercise(
    "06.4",
    "survive a signal and resume exactly (run the program for real)",
    allows=("starts processes", "exits or kills the process"),
    reference=(r"\btrain\(", r"\brecord\(", r"history\.json"),
)
def check_preempt_and_resume(
    preempt_and_resume, jobs=None, seed: int | None = None, steps: int | None = None
):
    named = slurm_record.named_jobs(jobs.value() if jobs is not None else None, "PREEMPTED_JOBS")
    if named:
        for job_id in named:
            _preempted_job_in_sacct(job_id)
        return PREEMPTED_PASSED.format(signal="SIGUSR1")
    slurm_record.needs_a_job(
        "06.4",
        "sbatch slurm/checkpoint_requeue.sh with --seed and --max-steps, then scancel "
        "--signal=USR1 --batch JOBID",
    )
    if seed is None or steps is None:
        seed, steps = draw_run()
    seen = outside(preempt_and_resume)
    with seen.folder("course-06.4-") as folder:
        ckpt_dir = f"{folder}/ckpt"
        with seen.processes() as started, seen.witnessing(PROGRAM_MODULE) as reports:
            call_answer(preempt_and_resume, ckpt_dir, seed, steps)
        newest = ck.latest_checkpoint(seen.path(ckpt_dir))
        final = newest.read_bytes() if newest is not None else None
    runs = [r for r in reports if os.path.normpath(str(r.get("ckpt_dir"))) == ckpt_dir]
    if not runs and seen.refused:
        raise CheckFailed(
            f"expected records written by the program ({PROGRAM}) in processes of its own, got "
            f"{seen.refused[0]}"
        )
    if not runs:
        raise NotAttempted(
            f"run the program first: preempt_and_resume(ckpt_dir, seed, steps) starts {PROGRAM} "
            "with --ckpt-dir ckpt_dir (and this kernel's environment, less SLURM_*), signals it "
            "and starts it again; the check heard from no such program"
        )
    stop = verify_runs(runs, seen.pid, seed, steps, sorted(started))
    expect(final is not None, "a final checkpoint in the folder", "none")
    want = uninterrupted(seed, steps)
    expect(
        final_hash(final) == want,
        "final parameters bitwise equal to the check's own uninterrupted run at its seed",
        "different parameters (resume with the same settings and folder)",
    )
    slurm_record.note("your runs, started by your function here, heard from outside")
    return PREEMPTED_PASSED.format(signal=stop["signal"])


# One line wherever the runs were (nbval compares it): the evidence column says which route.
PREEMPTED_PASSED = (
    "stopped by {signal}, saved, resumed in a new process, and ended bit for bit as the check's "
    "own uninterrupted run"
)


def _option(line: str, name: str) -> int | None:
    found = re.search(rf"{name}[ =](\d+)", line)
    return int(found[1]) if found else None


def _preempted_job_in_sacct(job_id: str) -> None:
    """A job the learner names: theirs, for the course, requeued (sacct shows a run REQUEUED
    before the one that COMPLETED), and the parameter hash the program left in its record equal
    to the judge's own uninterrupted run with the --seed, --max-steps and threads it ran with."""
    record = slurm_record.learner_job(job_id, "06.4")
    what = f"job {job_id}"
    expect(
        len(record.runs) >= 2 and "REQUEUED" in record.runs[:-1] and record.state == "COMPLETED",
        "a run requeued by the signal (REQUEUED) and the run after it COMPLETED (sacct "
        "--duplicates)",
        ", ".join(record.runs) or "no run",
        what,
    )
    program = next((line for line in record.step_lines if PROGRAM_MODULE in line), "")
    seed, steps = _option(program, "--seed"), _option(program, "--max-steps")
    epochs, threads = _option(program, "--epochs"), _option(program, "--threads") or 1
    expect(
        None not in (seed, steps) and epochs == EPOCHS,
        f"{PROGRAM} with --seed, --max-steps and --epochs {EPOCHS} in the job's step",
        program or "no such step",
        what,
    )
    done = re.match(
        r"^hash ([0-9a-f]{16}) step (\d+)$", witness.from_job_record(record.comment) or ""
    )
    expect(
        done is not None and int(done[2]) == steps,
        f"the final parameter hash the program left in the job's record, at step {steps}",
        record.comment or "none (did the resumed run finish?)",
        what,
    )
    want = uninterrupted(seed, steps, threads)
    expect(
        done[1] == want,
        f"final parameters bitwise equal to the check's own uninterrupted run at seed {seed}",
        "different parameters (resume with the same settings and folder)",
        what,
    )
    slurm_record.note(slurm_record.sacct_evidence(record) + ", its result reproduced")


# The check's own run, and its reading of the learner's checkpoint (in the judge).


def uninterrupted(seed: int, steps: int, threads: int = 1) -> str:
    """The same run, trained here in one go (the check's own reference): its parameter hash.
    `threads`: torch's, as the run had them (its summation order, and so its last bits)."""
    folder = tempfile.mkdtemp(prefix="course-06.4-reference-")
    config = resumable.Config(
        ckpt_dir=folder,
        seed=seed,
        max_steps=steps,
        epochs=EPOCHS,
        save_every=SAVE_EVERY,
        threads=threads,
    )
    try:
        with torch.random.fork_rng(devices=[]):
            return resumable.train(config, log=lambda msg: None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def final_hash(data: bytes) -> str:
    """The parameter hash of a checkpoint's model, loaded here with weights_only=True."""
    try:
        state = weights(data)["model"]
        with torch.random.fork_rng(devices=[]):
            model = TinyNet()
        model.load_state_dict(state)
    except Exception as e:
        raise CheckFailed(
            f"expected the newest checkpoint readable as the program writes it (weights_only=True,"
            f" a TinyNet's model), got {type(e).__name__}: {str(e)[:120]}"
        ) from None
    return parameter_hash(model)
