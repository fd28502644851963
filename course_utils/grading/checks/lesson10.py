"""Checkers of lesson 10, the cluster lab. 10.1 and 10.2 are runs, graded on the learner's own
jobs where they name them (Slurm's record, read with sacct: lesson10_jobs.py), else on the
check's own run of their function and script on this machine; 10.3 and 10.4 are decisions on
data, their own among it.

10.1 the learner's stage_dataset, in real processes at the judge's seed (probes/lesson10.py), in
     a folder the judge made: 2 nodes x 2 ranks, a node with only TMPDIR, the next job on that
     node, a rank with neither; one reader per node, the others wait, SLURM_TMPDIR before TMPDIR
     before /tmp, a folder per job and node; what each rank's folder holds is read by the judge
     on disk, from outside the learner's process. Where STAGING_JOBS names their staging job:
     sacct's record of it too (theirs, COMPLETED, a step of 4 tasks on 2 nodes, the course's
     staging program given --answer and the --digest of the stage_dataset in the cell now).
10.2 the learner's script keeps the lab's rules (lab.scripts, the header read as sbatch reads it:
     one task of a GPU's CPUs, memory asked for, a GPU per task that can reach its node's other
     GPUs, one srun line of the lab's program). Where STUDY_JOBS names their jobs: sacct's record
     of each (theirs, COMPLETED, the script as Slurm stored it, the result lab_train's rank 0
     left in its comment, of the shape sacct recorded): the four shapes once each and apart in
     time on a shared node, the sweep one array of 2 or more tasks; the judge trains the 1-rank
     runs' first steps itself and compares the losses. Else the check runs the study of the
     script on this machine, in a folder it made, and judges its records the same way (each
     carrying the script's digest).
10.3 names the transport in the CI cluster's 2-node log, the constructed NCCL excerpts (a network
     plugin's among them) and the learner's own 2-node run's log where there is one; held out:
     logs drawn at random and a plugin's excerpt of another name.
10.4 the GPU count (the course's one decision, how_many.choose) and the sweep's learning rate,
     on the learner's own runs (their jobs' results from sacct where STUDY_JOBS names them, else
     their local records) and on sets the check brings.
Where the runs were started is said as "[via slurm]" or "[via local ranks: no Slurm here]"; the
sanitize file's "lab launchers" rule makes the two compare equal.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from course_utils import how_many, reference
from course_utils.grading import (
    CheckFailed,
    NotAttempted,
    call_answer,
    exercise,
    expect,
    held_out,
    outside,
    run_probe,
)
from course_utils.grading.checks import lesson10_jobs, slurm_record
from course_utils.grading.checks.lesson10_cases import (
    HELD_OUT_PLUGIN,
    decide_cases,
    judge_ranks,
    synthetic_log,
)
from course_utils.grading.checks.lesson10_jobs import reproduced
from course_utils.grading.probes import lesson10 as probes
from course_utils.lab import (
    cluster,
    run_records,
    scaling,
    scripts,
    staging,
    transport,
)
from course_utils.lab.nccl_excerpts import EXCERPTS

LAUNCHERS = {"slurm": "[via slurm]", "local": "[via local ranks: no Slurm here]"}
SHAPES = {shape.name: shape for shape in cluster.SHAPES}
STUDY = "run the study first: the cell after exercise 10.2's check runs your script"
# a run forged in the kernel: the lab's program called in it, or its record writer
FORGED = (
    r"jobs\s+import\s+lab_train|jobs\.lab_train\s+import|lab_train\.main",
    r"run_records\.save",
)


def _jobs(jobs, what: str) -> list[str]:
    """The ids the learner named in the exercise cell (a proxy of their list, or None)."""
    return slurm_record.named_jobs(jobs.value() if jobs is not None else None, what)


# ---- 10.1 the staging step -----------------------------------------------------------------


def _judge(reports: list[dict], base: str, title: str, digest: str, seen) -> None:
    """The check's own run of one case: every rank returned a folder under `base` holding the
    whole archive (`digest`, of the files the judge finds on disk there, read from outside the
    learner's process); one rank per node read it; one folder per node. Two readers on a node
    are judged first: without a lock the ranks unpack over each other's files, and the missing
    lock, not the half-written file or the clash it caused, is what to tell."""
    judge_ranks(reports, base, title)
    for r in reports:
        on_disk = staging.content_digest(seen.path(r["path"]) / staging.IMAGES)
        expect(
            on_disk == digest,
            "the archive's files, whole, in the folder returned (as the check finds it on disk)",
            f"other contents (a folder of another job, or a copy cut short) in {r['path']}",
            f"{title}, {r['who']}",
        )


def _cleanup(seen, reports: list[dict], job: str, root: str) -> None:
    """Remove what the "/tmp" case left outside the check's folder `root`: each returned folder,
    and the folder above it that is named after the check's job, if there is one."""
    for path in (Path(r["path"]) for r in reports if r.get("path")):
        if path.is_relative_to(root) or not path.is_absolute() or job not in str(path):
            continue  # the check's folder goes as a whole; what it did not make, never
        shutil.rmtree(seen.path(path), ignore_errors=True)
        for folder in path.parents:
            if job in folder.name:
                shutil.rmtree(seen.path(folder), ignore_errors=True)
                break


def _staged_by_the_check(stage_dataset, seed: int) -> None:
    """The learner's function in the check's own processes, on an archive drawn from `seed`."""
    job = f"check-{uuid.uuid4().hex[:8]}"
    digest = staging.bytes_digest(probes.archive_files(seed))
    seen = outside(stage_dataset)
    with seen.folder("course-10.1-") as root:
        cases = run_probe(probes.staging_cases, stage_dataset, seed=seed, job=job, root=root)
        try:
            for case in cases:
                _judge(case["reports"], case["base"], case["title"], digest, seen)
        finally:
            _cleanup(seen, [r for case in cases for r in case["reports"]], job, root)


@exercise(
    "10.1",
    "stage the data set once per node, in the job",
    allows=("opens or removes files",),
    reference=(r"staging\.stage\(", r"\bstaging\.unpack\(", *FORGED),
)
def check_stage_dataset(stage_dataset, folder=None, jobs=None, seed: int = 0):
    got = run_probe(probes.staging_run, stage_dataset)
    if got["stub"]:
        raise NotImplementedError
    if got["source"] is None:
        raise CheckFailed("the source of stage_dataset cannot be read: define it in a cell")
    named = _jobs(jobs, "STAGING_JOBS")
    for job_id in named:
        lesson10_jobs.staging_job(job_id, got["source"])
    if not named:
        slurm_record.needs_a_job("10.1", "bash runs/10/jobs/submit_staging.sh prints its id")
    _staged_by_the_check(stage_dataset, seed)
    slurm_record.note("your stage_dataset in the check's own processes at the judge's seed")
    return (
        f"{LAUNCHERS['slurm' if named else 'local']} your stage_dataset staged the data set once "
        "per node: one reader per node, whole copies, a folder per job and node under "
        "SLURM_TMPDIR, else TMPDIR, else /tmp (in the check's own processes; on Slurm, your "
        "staging job's record too)"
    )


@held_out("10.1", cases=1)
def held_out_staging(rng, stage_dataset, folder=None, jobs=None):
    """Another archive: a copy kept from the visible case, or content made up, fails it."""
    _staged_by_the_check(stage_dataset, rng.randrange(1, 2**20))


# ---- 10.2 the scaling job's batch script, and the study of it -------------------------------


def _judge_study(records: list[dict], text: str, logs: dict) -> list[dict]:
    """The records of the check's own study of `text`, judged: the four shapes and the sweep."""
    if not records and logs:
        name, tail = next(iter(logs.items()))
        raise CheckFailed(
            f"your script's runs wrote no record; the last lines of run {name}:\n{tail}"
        )
    if not records:
        raise CheckFailed("your script's study wrote no record and no log")
    mine = [r for r in records if r.get("label", {}).get("script") == cluster.digest(text)]
    expect(
        mine,
        "records of the script scaling_script returns",
        "records of another (does it return the same text every time?)",
        "your script's study",
    )
    for r in mine:
        problems = run_records.validate(r)
        expect(not problems, "a valid record", "; ".join(problems), f"record {r.get('name')}")
    scaling_runs = {r["name"]: r for r in mine if r["study"] == "scaling"}
    expect(sorted(scaling_runs) == sorted(SHAPES), f"runs {sorted(SHAPES)}", sorted(scaling_runs))
    for name, r in scaling_runs.items():
        c, shape = r["configuration"], SHAPES[name]
        got = (c["nodes"], c["ranks"], c["steps"], c["batch_per_rank"])
        want = (shape.nodes, shape.ranks, cluster.STEPS, 32)
        expect(got == want, f"(nodes, ranks, steps, batch) {want}", got, f"run {name}")
    sweep = [r for r in mine if r["study"] == "sweep"]
    lrs = sorted(r["configuration"]["lr"] for r in sweep)
    expect(len(set(lrs)) >= 2, "a sweep of 2 or more learning rates", lrs, "the sweep")
    for r in sweep:
        expect(r["configuration"]["ranks"] == 1, "1 rank per sweep task", r["name"], "the sweep")
    for r in [scaling_runs["1x1"], *sweep]:
        reproduced(r, f"run {r['name']}")
    return sweep


def _study_by_the_check(scaling_script) -> dict:
    """The study of the learner's script, run by the check on this machine in a folder it
    made (the four shapes one after another, then the sweep), read back from outside."""
    seen = outside(scaling_script)
    with seen.folder("course-10.2-") as root:
        run_probe(probes.study_here, scaling_script, root=root)
        return probes.study_files(seen.path(root))


@exercise(
    "10.2",
    "the scaling job's batch script, and your study of it",
    reference=(r"lab_scaling\.sh", r"SCRIPTS\[", *FORGED),
)
def check_scaling_script(scaling_script, folder=None, jobs=None):
    text = call_answer(scaling_script)
    expect(type(text) is str, "the script as a str", type(text).__name__)
    problems = scripts.scaling_script_problems(text)
    if problems:
        raise CheckFailed(f"expected {problems[0]}")
    named = _jobs(jobs, "STUDY_JOBS")
    if named:
        lesson10_jobs.study_jobs(named, text)
    else:
        slurm_record.needs_a_job("10.2", "bash runs/10/jobs/submit_study.sh prints their ids")
        found = _study_by_the_check(scaling_script)
        _judge_study(found["records"], text, found["logs"])
        slurm_record.note("your script's study, run by the check on this machine")
    return (
        f"{LAUNCHERS['slurm' if named else 'local']} your script ran the four shapes one after "
        "another and a learning-rate sweep; the 1-rank runs' first losses are the ones the check "
        "trains"
    )


# ---- 10.3 the transport --------------------------------------------------------------------


def _own_log(folder) -> str | None:
    """The learner's own 2-node run's log (their job's, else their run's on this machine) where
    one finished and names its links; None otherwise: 10.3 decides on the other logs then."""
    log = run_probe(probes.two_node_log, folder) if folder is not None else None
    return log if log and "record 2x2:" in log and transport.links(log) else None


def _transport_cases(log: str | None) -> list[tuple[str, str, str]]:
    recorded = reference.load(cluster.REFERENCE)
    expect(recorded is not None, f"the CI cluster's records ({cluster.REFERENCE}.json)", "none")
    cases = [("your own 2-node run's log", log, transport.diagnose(log))] if log else []
    ci = recorded["logs"]["2x2"]
    cases.append(("the CI cluster's 2-node log", ci, transport.diagnose(ci)))
    excerpts = [(n, e) for n, e in EXCERPTS.items() if e.kind in transport.TAUGHT]
    return cases + [(f"the constructed excerpt {n!r}", e.text, e.kind) for n, e in excerpts]


def _named(diagnose_transport, what: str, log: str, want: str) -> None:
    got = call_answer(diagnose_transport, log)
    expect(
        type(got) is str and got in transport.TAUGHT,
        f"one of {list(transport.TAUGHT)}",
        repr(got),
        what,
    )
    hint = ""
    if got != want and want in transport.NETWORK_ORDER and got in transport.NODE_ORDER:
        hint = ": across nodes the network link decides, not the links within a node"
    expect(got == want, repr(want), f"{got!r}{hint}", what)


@exercise(
    "10.3",
    "name the transport from a log",
    reference=(r"transport\.diagnose\(", r"transport\.links\(", *FORGED),
)
def check_diagnose_transport(diagnose_transport, folder=None):
    for what, log, want in _transport_cases(_own_log(folder)):
        _named(diagnose_transport, what, log, want)
    return (
        "named the transport in the CI cluster's 2-node log, the constructed NCCL excerpts and "
        "your own 2-node run's log where it ran"
    )


@held_out("10.3", cases=3)
def held_out_transport(rng, diagnose_transport, folder=None):
    """Logs drawn at random, and a plugin's excerpt the notebook never shows (its older name,
    its network links only): an answer that only knows the visible logs fails them."""
    log = synthetic_log(rng)
    _named(diagnose_transport, "a log the check drew", log, transport.diagnose(log))
    what = "a held-out excerpt (a network plugin of another name)"
    _named(diagnose_transport, what, HELD_OUT_PLUGIN, "plugin")


# ---- 10.4 how many GPUs, and the sweep's learning rate --------------------------------------


def _decided(decide, what: str, records: list, sweep: list, deadline) -> None:
    got = call_answer(decide, records, sweep, scaling.WORK, deadline)
    shape = type(got) in (tuple, list) and len(got) == 2
    expect(shape, "a pair (gpus, lr)", repr(got)[:80], what)
    gpus, lr = got
    rows = scaling.scaling_rows(records)
    want = how_many.choose(scaling.rates(rows), scaling.WORK, deadline)
    expect(type(gpus) is int and gpus == want.gpus, f"{want.gpus} GPUs ({want.why})", gpus, what)
    best = scaling.best_lr(sweep)
    expect(type(lr) in (int, float) and lr == best, f"lr {best:g} (the lowest last loss)", lr, what)


def _own_data(folder, jobs) -> tuple[list, list]:
    """The learner's own study as data: their named jobs' results in sacct, else the records of
    their study on this machine (runs/10/records); not attempted without either."""
    named = _jobs(jobs, "STUDY_JOBS")
    if named:
        return lesson10_jobs.study_as_data(named)
    records = run_probe(probes.study_records, folder)["records"] if folder is not None else []
    own = [r for r in records if r.get("study") == "scaling"]
    sweep = [r for r in records if r.get("study") == "sweep"]
    if sorted(r.get("name") for r in own) != sorted(SHAPES) or not sweep:
        raise NotAttempted(
            STUDY + ": this check decides on your study's records (runs/10/records), or on your "
            "jobs' results in sacct (STUDY_JOBS)"
        )
    for r in own + sweep:
        problems = run_records.validate(r)
        expect(not problems, "a valid record", "; ".join(problems), f"your record {r.get('name')}")
    slurm_record.note("your study's records on this machine, as data")
    return own, sweep


@exercise(
    "10.4",
    "the GPU count and the learning rate, from your own runs",
    reference=(r"scaling\.ranks_to_ask\(", r"scaling\.rates\(", r"scaling\.best_lr\(", *FORGED),
)
def check_decide(decide, folder=None, jobs=None):
    own, sweep = _own_data(folder, jobs)
    for what, records, runs, deadline in decide_cases(own, sweep):
        _decided(decide, what, records, runs, deadline)
    return (
        "the GPU count agrees with the course's one decision (how_many.choose) and the "
        "learning rate with your sweep, on your own runs and on every set the check brought"
    )


@held_out("10.4", cases=3)
def held_out_decide(rng, decide, folder=None, jobs=None):
    """Efficiencies, deadlines and sweeps drawn at random: a table of the visible answers fails."""
    own, sweep = _own_data(folder, jobs)
    what, records, runs, deadline = decide_cases(own, sweep, rng)[-1]
    _decided(decide, what, records, runs, deadline)
