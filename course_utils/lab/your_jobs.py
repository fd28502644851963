"""The learner's own jobs of lesson 10: written for them to submit, waited for, read back from
Slurm's record. Taught in lesson 10.

    job = your_jobs.staging_job(stage_dataset, "runs/10")     # your function as a module, and
    print(job.command)                                         #   the sbatch line that runs it
    study = your_jobs.study_jobs(scaling_script, "runs/10")   # your script and submit_study.sh
    your_jobs.wait(["4210", "4217"])                           # until they end or one fails
    records, sweep, said = your_jobs.study_from_sacct(["4210", "4211", "4212", "4213", "4217"])

Nothing here submits: the learner runs the commands from the notebook's folder, as themselves,
on their own account, and names the ids sbatch printed in the exercise cell (STAGING_JOBS,
STUDY_JOBS), so that Slurm's record of their jobs is what the lesson reads and the judge grades.
The study's shapes go in one after another (`--dependency=afterany:<previous>`: no two shapes
measure each other on a node), the sweep as one throttled array. Every file goes under
<runs>/jobs (JOBS): the learner's function and script, submit_study.sh, and what the jobs write
(staging/, records/, logs/), which the notebook's local route never touches.

A wait on the learner's jobs never cancels one: it ends when every job has left the queue, when
one ended without completing, or when the learner interrupts it (then it says which are still
pending or running, and they keep their places).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from course_utils import accounting, batch, notebook_code, paths, witness
from course_utils.files import atomic_write_text
from course_utils.lab import cluster, run_records, scripts
from course_utils.paths import REPO_ROOT

JOBS = "jobs"  # <runs>/jobs: the learner's job files and what their jobs write
ENDED_BADLY = ("FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL")


@dataclass(frozen=True)
class Submission:
    """One sbatch command of the learner's: `name` (a shape such as "1x2", "sweep" or
    "staging"), the options before the script, the script and its arguments. `after` names
    the submission whose job this one waits for (--dependency=afterany), if any."""

    name: str
    options: tuple[str, ...]
    script: Path
    args: tuple[str, ...]
    after: str | None = None

    def argv(self, after_job: str | None = None) -> list[str]:
        """sbatch's command line, waiting for job `after_job` where this one comes after one."""
        wait = (f"--dependency=afterany:{after_job}",) if after_job else ()
        return ["sbatch", "--parsable", *wait, *self.options, str(self.script), *self.args]


@dataclass(frozen=True)
class Written:
    """What a cell wrote for the learner to submit: the commands, and how to run them."""

    submissions: tuple[Submission, ...]
    command: str  # what to type, from the notebook's folder
    files: tuple[Path, ...]  # the submit script last

    def sbatch_lines(self) -> str:
        """The submit script's sbatch lines, with paths as a learner reads them."""
        lines = self.files[-1].read_text().splitlines()
        return paths.as_learner_sees("\n".join(line for line in lines if line.startswith("job")))


STAGING_HEAD = (
    "Exercise 10.1's staging job with your stage_dataset, written by lesson 10",
    "2 nodes x 2 tasks of the course's slurm/lab_staging.sh, your function given as --answer.",
)
STUDY_HEAD = (
    "Exercise 10.2's study of your script, written by lesson 10",
    "The shapes run one after another (--dependency=afterany: each waits for the one before to",
    "end, so that no two measure each other on a node); the sweep is one throttled array.",
)


def folder(runs: str | Path) -> Path:
    return Path(runs) / JOBS


def staging_job(stage_dataset, runs: str | Path) -> Written:
    """Exercise 10.1's job: the learner's function as <runs>/jobs/stage_dataset_yours.py, and
    <runs>/jobs/submit_staging.sh, which submits the course's staging script (slurm/lab_staging.sh:
    2 nodes x 2 tasks) to run it, with the digest of its source (the judge compares it with the
    function in the notebook then), and prints the id for STAGING_JOBS. NotImplementedError for
    the stub: there is nothing to run yet."""
    if notebook_code.is_stub(stage_dataset):
        raise NotImplementedError("stage_dataset is still the stub")
    jobs = folder(runs)
    module = notebook_code.function_module(stage_dataset, "stage_dataset", jobs)
    answer = cluster.digest(notebook_code.source(stage_dataset))
    logs = jobs / "logs"
    args = ("--data", f"{runs}/data", "--out", str(jobs / "staging"))
    args += ("--answer", str(module), "--digest", answer)
    job = Submission(
        "staging", (f"--output={logs}/staging-%j.out",), cluster.SCRIPTS["staging"], args
    )
    runner = _write_submit(jobs / "submit_staging.sh", STAGING_HEAD, (job,), {}, "STAGING_JOBS")
    logs.mkdir(parents=True, exist_ok=True)
    return Written((job,), f"bash {runner}", (module, runner))


def study_jobs(scaling_script, runs: str | Path, lrs=cluster.LRS, environ=None) -> Written:
    """Exercise 10.2's jobs: the learner's script as <runs>/jobs/lab_scaling_yours.sh (and its
    CPU variant for a CPU run, COURSE_DEVICE=cpu), each shape of the study one job of it sized
    on sbatch's command line, one after another, and the sweep one throttled array of it; all
    in <runs>/jobs/submit_study.sh, which prints the ids for STUDY_JOBS. Calls the learner's
    `scaling_script()` (the stub raises NotImplementedError)."""
    text = scaling_script()
    if type(text) is not str:
        raise TypeError(
            f"scaling_script() returned {type(text).__name__}: expected the batch script as a str"
        )
    jobs = folder(runs)
    script = atomic_write_text(jobs / "lab_scaling_yours.sh", text)
    submitted, files = script, [script]
    if cluster.cpu_run(environ):  # a cluster without GPUs may refuse any GPU option
        submitted = atomic_write_text(jobs / "lab_scaling_yours-cpu.sh", scripts.cpu_variant(text))
        files.append(submitted)
    logs, records = jobs / "logs", jobs / "records"
    data = f"{runs}/data"
    chain, previous = [], None
    for shape in cluster.SHAPES:
        options = (
            f"--job-name={cluster.job_name(shape.name, text)}",
            f"--output={logs}/{shape.name}-%j.out",
            *shape.sbatch_options(),
            *cluster.device_options(text, shape, environ),
        )
        args = ("--data", data, "--out", str(records), "--study", "scaling")
        args += ("--steps", str(cluster.STEPS))
        chain.append(Submission(shape.name, options, submitted, args, previous))
        previous = shape.name
    values = ",".join(f"{lr:g}" for lr in lrs)
    options = (
        f"--array=0-{len(lrs) - 1}%{cluster.THROTTLE}",
        f"--job-name={cluster.job_name('sweep', text)}",
        f"--output={logs}/sweep-%A_%a.out",
        *cluster.device_options(text, batch.Shape(1, 1), environ),
    )
    args = ("--data", data, "--out", str(records), "--study", "sweep")
    args += ("--steps", str(cluster.SWEEP_STEPS), "--lrs", values)
    sweep = Submission("sweep", options, submitted, args)
    submissions = (*chain, sweep)
    exports = cluster.run_environ(text)  # the records carry the digest; NCCL names its transport
    runner = _write_submit(jobs / "submit_study.sh", STUDY_HEAD, submissions, exports, "STUDY_JOBS")
    logs.mkdir(parents=True, exist_ok=True)
    return Written(submissions, f"bash {runner}", (*files, runner))


def _write_submit(
    path: Path, head, submissions: Sequence[Submission], exports: dict, names: str
) -> Path:
    """A submit script at `path`: each submission one sbatch line (one after another where a
    submission comes after another), then the ids as the exercise cell's list `names`."""
    lines = [
        "#!/bin/bash",
        f"# {head[0]}. Run it from the folder the notebook runs in:  bash {path}",
        *(f"# {line}" for line in head[1:]),
        f"# It prints the ids to put in {names}; nothing waits here (squeue -u $USER shows them).",
        "set -euo pipefail",
        f"export COURSE_DIR={shlex.quote(str(REPO_ROOT))}  # the course's folder",
        "# shellcheck source=/dev/null",
        'source "$COURSE_DIR/slurm/config.sh"  # your account and partition (COURSE_ACCOUNT, ...)',
    ]
    if exports:
        lines.append("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in exports.items()))
    lines.append("submit() { sbatch \"$@\" | cut -d';' -f1; }")
    ids = {}
    for number, s in enumerate(submissions, start=1):
        var = f"job{number}"
        words = [shlex.quote(w) for w in s.argv()[1:]]
        if s.after:
            words.insert(1, f'--dependency=afterany:"${ids[s.after]}"')
        lines.append(f"{var}=$(submit {' '.join(words)})  # {s.name}")
        ids[s.name] = var
    listed = ", ".join(f'\\"${var}\\"' for var in ids.values())
    lines.append(f'echo "{names} = [{listed}]"')
    return atomic_write_text(path, "\n".join(lines) + "\n")


# ---- waiting for them ------------------------------------------------------------------------


def _queued(job_ids: Sequence[str]) -> dict[str, list[tuple[str, str, str]]]:
    """{named job: [(task, state, reason), ...]} for the named jobs squeue still lists."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for task, (state, reason) in batch.job_states(",".join(job_ids)).items():
        for job in job_ids:
            if task == job or task.startswith(f"{job}_"):
                found.setdefault(job, []).append((task, state, reason))
    return found


def _ended(job: str) -> str:
    """The worst final state of a job that left the queue (an array: of its tasks), "" while
    sacct has not written its end yet."""
    lines = [s for s in accounting.job_steps(job) if not s.is_step]
    if not lines or any(s.state in accounting.ACTIVE for s in lines):
        return ""
    bad = [s.state for s in lines if s.state != "COMPLETED"]
    return bad[0] if bad else "COMPLETED"


def _said(states: dict[str, str]) -> str:
    return ", ".join(f"{job} {state}" for job, state in states.items())


def wait(job_ids: Sequence, poll: float | None = None) -> dict[str, str]:
    """Wait until each named job has ended, or one has ended without completing (FAILED,
    CANCELLED, TIMEOUT, ...); {job: its state} as Slurm last said. A job still waiting in the
    queue is PENDING, never failed, and nothing is cancelled: a busy partition only makes the
    wait longer. Interrupted (the kernel's stop button), it says which jobs are still pending
    or running, leaves them in the queue, and raises KeyboardInterrupt."""
    job_ids = [str(j) for j in job_ids]
    poll = batch.POLL if poll is None else poll
    states: dict[str, str] = {}
    shown = ""
    try:
        while True:
            queued = _queued(job_ids)
            for job in job_ids:
                if job in queued:
                    tasks = queued[job]
                    worst = "RUNNING" if any(s == "RUNNING" for _, s, _ in tasks) else tasks[0][1]
                    why = next((r for _, s, r in tasks if s == "PENDING" and r != "None"), "")
                    states[job] = worst + (f" ({why})" if why else "")
                elif states.get(job) not in ("COMPLETED", *ENDED_BADLY):
                    states[job] = _ended(job) or "ENDING"  # sacct writes the end a moment later
            said = _said(states)
            if said != shown:
                print(f"your jobs: {said}", flush=True)
                shown = said
            if any(states[j] in ENDED_BADLY for j in job_ids):
                failed = [j for j in job_ids if states[j] in ENDED_BADLY]
                print(f"job {failed[0]} ended {states[failed[0]]}: its log says why", flush=True)
                return states
            if all(states[j] == "COMPLETED" for j in job_ids):
                return states
            time.sleep(poll)
    except KeyboardInterrupt:
        left = {j: s for j, s in states.items() if s != "COMPLETED"}
        print(
            f"stopped waiting; still in the queue, and left there: {_said(left) or 'none'} "
            "(squeue -u $USER shows them; scancel JOBID ends one)",
            flush=True,
        )
        raise


# ---- reading them back -----------------------------------------------------------------------


def study_from_sacct(job_ids: Sequence) -> tuple[list[dict], list[dict], list[str]]:
    """The learner's study as Slurm recorded it: (scaling runs, sweep runs, what is missing),
    each run the summary lab_train's rank 0 left in its job's comment (`run_records.
    from_comment`), labelled with its job, its nodes and `launcher` "slurm"; an array's tasks
    are runs of their own. A job that did not complete, or left no result, is said, not used."""
    records, missing = [], []
    for job_id in map(str, job_ids):
        found = accounting.job_records(job_id)
        if not found:
            missing.append(f"job {job_id}: no record in sacct (no such job of yours?)")
        for job in found:
            run = run_records.from_comment(witness.from_job_record(job.comment) or "")
            if job.state != "COMPLETED" or run is None:
                missing.append(f"job {job.job_id} {job.state}: no result in its comment")
                continue
            machine = f"Slurm job {job.job_id} on {job.nodelist}"
            run["label"] = {"launcher": "slurm", "job": job.job_id, "machine": machine}
            records.append(run)
    scaling = sorted(
        (r for r in records if r["study"] == "scaling"),
        key=lambda r: (r["configuration"]["ranks"], r["name"]),
    )
    sweep = [r for r in records if r["study"] == "sweep"]
    return scaling, sweep, missing


def staging_results(job_id, runs: str | Path) -> list[dict]:
    """What each rank of the learner's staging job wrote (<runs>/jobs/staging/rank*.json, of
    that job only), by rank; [] where it wrote nothing there."""
    from course_utils.lab import staging

    found = folder(runs) / "staging"
    if not list(found.glob("rank*.json")):
        return []
    return [r for r in staging.load_results(found) if str(r.get("job")) == str(job_id)]


def log_of(job_id, runs: str | Path) -> str | None:
    """The output of the learner's job `job_id` (<runs>/jobs/logs/*-<id>.out), or None."""
    logs = sorted((folder(runs) / "logs").glob(f"*-{job_id}.out"))
    return logs[0].read_text(errors="replace") if logs else None


def written_record(run: dict, runs: str | Path) -> dict:
    """The whole record the learner's job of `run` wrote (<runs>/jobs/records/<study>/<name>.
    json: its devices, energy, staging and more), where this folder has it and it is that job's;
    else `run` itself, the summary its job's comment holds."""
    import json

    path = run_records.record_path(folder(runs) / "records", run["study"], run["name"])
    try:
        written = json.loads(path.read_text())
    except (OSError, ValueError):
        return run
    same = written.get("label", {}).get("job") == run.get("label", {}).get("job")
    return written if same and not run_records.validate(written) else run
