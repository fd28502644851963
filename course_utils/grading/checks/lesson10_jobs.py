"""Lesson 10's jobs on Slurm's record: what exercises 10.1 and 10.2 hold the learner's own jobs
to, and the study's runs read as data for 10.4 (lesson10.py calls them; they run in the judge).

    staging_job(job_id, source)       10.1: the learner's staging job, with their function
    study_jobs(named, text)           10.2: the four shapes, apart, and the sweep's array
    study_as_data(named)              10.4: the runs of the named jobs, as plain records

Everything here is read from sacct (`slurm_record.learner_jobs`: the learner's login, the
course's account and window, a job that has not ended is "not attempted yet"), with the rights
of whoever grades: the instructor's machine has only the notebook, so each run's result is the
summary lab_train's rank 0 left in its job's comment (`run_records.from_comment`), and the judge
trains the 1-rank runs' first steps itself (`lesson10_cases.first_losses`).
"""

from __future__ import annotations

import itertools
import math
import re

from course_utils import accounting, notebook_code, witness
from course_utils.grading import CheckFailed, expect
from course_utils.grading.checks import slurm_record
from course_utils.grading.checks.lesson10_cases import first_losses
from course_utils.lab import cluster, run_records, scripts
from course_utils.ranks import expand_hostlist

SHAPES = {shape.name: shape for shape in cluster.SHAPES}
STAGING = re.compile(r"-m\s+course_utils\.jobs\.lab_staging\b")
DIGEST = re.compile(r"--digest[= ]+(\S+)")
APART = (
    "submit the shapes one after another (--dependency=afterany:<previous job>, as "
    "runs/10/jobs/submit_study.sh does) or each with --exclusive"
)


def reproduced(record: dict, what: str) -> None:
    """A 1-rank run's first losses are the ones the judge trains at its lr and batch."""
    config, losses = record["configuration"], record.get("losses")
    first = run_records.COMMENT_LOSSES  # a run's comment carries as many; the judge trains them
    expect(type(losses) is list and len(losses) >= first, "the run's losses", losses, what)
    mine = first_losses(float(config["lr"]), int(config["batch_per_rank"]), first)
    # on the CPU the same steps agree to ~1e-6 whatever the threads; a GPU's convolutions
    # (cuDNN, TF32 by default) differ more
    tol = 5e-3 if config["device"] == "cuda" else 1e-4
    same = all(type(x) is float and math.isclose(x, y, abs_tol=tol) for x, y in zip(losses, mine))
    shown = [round(x, 4) for x in mine]
    expect(same, f"first losses {shown}, as the check trains the same run", losses[:5], what)


# ---- 10.1 -------------------------------------------------------------------------------------


def staging_job(job_id: str, source: str) -> None:
    """The learner's staging job: theirs, COMPLETED, a step of 4 tasks on 2 nodes, the course's
    staging program (slurm/lab_staging.sh's srun line) given --answer and the --digest of the
    stage_dataset in the notebook now (on sbatch's line, or in a script of their own)."""
    record = slurm_record.learner_job(job_id, "10.1")
    what = f"job {job_id}"
    expect(record.state == "COMPLETED", "a COMPLETED job", record.state, what)
    four = [s for s in record.steps if s.is_step and s.tasks == 4 and s.nodes == 2]
    expect(bool(four), "a step of 4 tasks on 2 nodes (srun)", slurm_record.allocation(record), what)
    stored = record.script or ""
    expect(
        STAGING.search(stored) is not None,
        "a script that runs python -m course_utils.jobs.lab_staging (slurm/lab_staging.sh)",
        "another script" if stored else "no script stored (AccountingStoreFlags=job_script)",
        what,
    )
    commands = [line for line in stored.splitlines() if not line.lstrip().startswith("#")]
    given = "\n".join([record.submit_line, *commands])  # sbatch's line, the script's commands
    expect("--answer" in given, "--answer with your stage_dataset as a module", "none", what)
    want, found = notebook_code.digest(source), DIGEST.search(given)
    expect(
        found is not None and found[1] == want,
        f"--digest {want}, the digest of the stage_dataset in your cell now (the sbatch line "
        "the lesson prints)",
        f"{found[1]}: another version of it; submit it again" if found else "no --digest",
        what,
    )
    slurm_record.note(slurm_record.sacct_evidence(record) + ", your stage_dataset's digest")


# ---- 10.2 -------------------------------------------------------------------------------------


def _shape(record: accounting.JobRecord) -> tuple[int, int]:
    """(nodes, tasks) of a job as sacct recorded it: its own line's nodes, its largest step."""
    job = next((s for s in record.steps if not s.is_step), None)
    steps = [s for s in record.steps if s.is_step and s.job_id.split(".")[-1].isdigit()]
    return (job.nodes if job else 0), max((s.tasks or 0 for s in steps), default=0)


def _same_script(stored: str | None, text: str) -> bool:
    """Slurm stored the learner's script as it is (sacct prints it after its own header), or
    its CPU variant, which a CPU run submits."""
    if stored is None:
        return False
    found = stored.strip("\n")
    return found in (text.strip("\n"), scripts.cpu_variant(text).strip("\n"))


def _run_of(record: accounting.JobRecord, text: str) -> dict:
    """One job of the study, held to the task: COMPLETED, the learner's script as Slurm stored
    it, and the result lab_train's rank 0 left in its comment, of the shape sacct recorded."""
    what = f"job {record.job_id}"
    expect(record.state == "COMPLETED", "a COMPLETED job", record.state, what)
    expect(
        _same_script(record.script, text),
        "the script scaling_script returns now, as Slurm stored it",
        "another script" if record.script else "no script stored (AccountingStoreFlags=job_script)",
        what,
    )
    run = run_records.from_comment(witness.from_job_record(record.comment) or "")
    expect(
        run is not None,
        "the result rank 0 of course_utils.jobs.lab_train leaves in its job's comment",
        repr(record.comment) if record.comment else "no comment (did rank 0 finish?)",
        what,
    )
    nodes, tasks = _shape(record)
    config = run["configuration"]
    expect(
        (config["nodes"], config["ranks"]) == (nodes, tasks),
        f"a result of the {nodes} node(s) x {tasks} task(s) sacct recorded",
        f"one of {config['nodes']} x {config['ranks']}",
        what,
    )
    return {**run, "job": record}


def _apart(shapes: dict[str, dict]) -> None:
    """No two shapes ran on one node at the same time (each would measure the other): their
    nodes and times as sacct recorded them; where a time is missing, both asked --exclusive."""
    for (a, one), (b, other) in itertools.combinations(sorted(shapes.items()), 2):
        x, y = one["job"], other["job"]
        shared = set(expand_hostlist(x.nodelist or "?")) & set(expand_hostlist(y.nodelist or "?"))
        if not shared:
            continue
        if x.started and x.ended and y.started and y.ended:
            together = x.started < y.ended and y.started < x.ended
        else:
            together = not all("--exclusive" in j.submit_line.split() for j in (x, y))
        if together:
            raise CheckFailed(
                f"jobs {x.job_id} ({a}) and {y.job_id} ({b}): expected shapes that do not share "
                f"a node at the same time, got both on {sorted(shared)[0]} at once ({x.started} "
                f"to {x.ended}, {y.started} to {y.ended}): each measured the other; {APART}"
            )


def study_jobs(named: list[str], text: str) -> None:
    """The learner's study on the record: the four shapes, one job each, apart; the sweep one
    array of 2 or more tasks of 1 rank, each its own learning rate; the 1-rank runs' first
    losses the judge's own."""
    runs = [
        _run_of(record, text)
        for job_id in named
        for record in slurm_record.learner_jobs(job_id, "10.2")
    ]
    shapes: dict[str, dict] = {}
    for run in (r for r in runs if r["study"] == "scaling"):
        config = run["configuration"]
        name = f"{config['nodes']}x{config['ranks'] // config['nodes']}"
        if name in shapes:
            first, again = shapes[name]["job"].job_id, run["job"].job_id
            raise CheckFailed(
                f"STUDY_JOBS: expected one job of each shape, got {name} twice (jobs {first} "
                f"and {again}): name the one your study keeps"
            )
        shapes[name] = run
    expect(
        sorted(shapes) == sorted(SHAPES),
        f"jobs of the shapes {sorted(SHAPES)} (nodes x tasks per node)",
        sorted(shapes),
        "STUDY_JOBS",
    )
    _apart(shapes)
    sweep = [r for r in runs if r["study"] == "sweep"]
    arrays = {r["job"].job_id.split("_")[0] for r in sweep}
    lrs = sorted(r["configuration"]["lr"] for r in sweep)
    expect(
        len(sweep) >= 2 and all("_" in r["job"].job_id for r in sweep) and len(arrays) == 1,
        "the sweep as one job array of 2 or more tasks (sbatch --array=0-2%2 ...)",
        ", ".join(r["job"].job_id for r in sweep) or "no sweep",
        "STUDY_JOBS",
    )
    expect(len(set(lrs)) == len(lrs), "a learning rate of its own per task", lrs, "the sweep")
    for run in sweep:
        what = f"job {run['job'].job_id}"
        expect(run["configuration"]["ranks"] == 1, "1 rank per sweep task", run["name"], what)
    for run in [shapes["1x1"], *sweep]:
        reproduced(run, f"job {run['job'].job_id} ({run['name']})")
    for run in runs:
        slurm_record.note(slurm_record.sacct_evidence(run["job"]))


# ---- 10.4 -------------------------------------------------------------------------------------


def study_as_data(named: list[str]) -> tuple[list[dict], list[dict]]:
    """The runs of the learner's named jobs, as 10.4's data: (scaling runs, sweep runs), each
    the summary in its job's comment. Read, not claimed: the jobs stay 10.2's evidence."""
    runs = []
    for job_id in named:
        for record in slurm_record.learner_jobs(job_id, "10.4", claim=False):
            run = run_records.from_comment(witness.from_job_record(record.comment) or "")
            what = f"job {record.job_id}"
            expect(record.state == "COMPLETED", "a COMPLETED job", record.state, what)
            expect(run is not None, "lab_train's result in its comment", record.comment, what)
            runs.append(run)
    scaling = [r for r in runs if r["study"] == "scaling"]
    sweep = [r for r in runs if r["study"] == "sweep"]
    ones = [r for r in scaling if r["configuration"]["ranks"] == 1]
    expect(len(ones) == 1 and sweep, "one 1-rank run and a sweep", [r["name"] for r in runs])
    slurm_record.note(f"your study's jobs as data, read from sacct: {', '.join(named)}")
    return scaling, sweep
