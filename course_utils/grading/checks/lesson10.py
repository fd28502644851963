"""Checkers of lesson 10, the cluster lab. Every exercise is graded on the learner's own runs:
without them the check says "not attempted yet: run ... first".

10.1 the staging step of the notebook staged the lab's data set with the learner's function
     (2 nodes x 2 ranks): one copy per node, whole (its digest is the data set's, which the judge
     computes), from this very function (the digest of its source); then the function runs in
     real processes on an archive drawn from the judge's seed (probes/lesson10.py), in a folder
     the judge made: one reader per node, the others wait, SLURM_TMPDIR before TMPDIR before
     /tmp, a folder per job and node; what each rank's folder holds is read by the judge on disk,
     from outside the learner's process.
10.2 the learner's script keeps the lab's rules (lab.scripts, the header read as sbatch reads it:
     one task of a GPU's CPUs, memory asked for, a GPU per task that can reach its node's other
     GPUs, one srun line of the lab's program) and drove the whole study: a record
     of each of the four shapes and of every sweep task, each valid and carrying the script's
     digest; the judge trains the 1-rank runs' first steps itself and compares the losses; where
     a run was a Slurm job, sacct's record of it (state, name with the digest, nodes).
10.3 names the transport in the learner's own 2-node run's log, the CI cluster's, and the
     constructed NCCL excerpts, a network plugin's among them (a probe reads the log); held
     out: logs drawn at random and a plugin's excerpt of another name.
10.4 the GPU count (the course's one decision, how_many.choose) and the sweep's learning rate,
     from the learner's own records, and from sets the check brings.
Where the runs were started is said as "[via slurm]" or "[via local ranks: no Slurm here]"; the
sanitize file's "lab launchers" rule makes the two compare equal.
"""

from __future__ import annotations

import functools
import math
import shutil
import uuid
from pathlib import Path

from course_utils import accounting, how_many, notebook_code, reference
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
from course_utils.grading.checks.lesson10_cases import (
    HELD_OUT_PLUGIN,
    decide_cases,
    first_losses,
    judge_ranks,
    synthetic_log,
)
from course_utils.grading.probes import lesson10 as probes
from course_utils.lab import (
    cluster,
    run_records,
    scaling,
    scripts,
    small_files,
    staging,
    transport,
)
from course_utils.lab.nccl_excerpts import EXCERPTS

FIRST_LOSSES = 5  # the 1-rank runs' first losses the judge trains itself
LAUNCHERS = {"slurm": "[via slurm]", "local": "[via local ranks: no Slurm here]"}
SHAPES = {shape.name: shape for shape in cluster.SHAPES}
STUDY = "run the study first: the last lines of exercise 10.2's cell run your script"
# a run forged in the kernel: the lab's program called in it, or its record writer
FORGED = (
    r"jobs\s+import\s+lab_train|jobs\.lab_train\s+import|lab_train\.main",
    r"run_records\.save",
)


def _folder_given(folder) -> None:
    if folder is None:
        raise NotAttempted("run the lesson's cells first: the check reads runs/10")


# ---- 10.1 the staging step -----------------------------------------------------------------


@functools.cache
def _dataset_digest() -> str:
    return small_files.content_digest()


def _judge_staging_step(results: list[dict], source: str) -> None:
    """The notebook's staging step, as its ranks reported it."""
    if not results:
        raise NotAttempted(
            "run the staging step first: the exercise cell ends with "
            "cluster.stage_and_measure(..., stage_dataset), which stages the lab's data set with "
            "your function on 2 nodes x 2 ranks"
        )
    what = "the staging step (runs/10/staging)"
    answers = {r.get("answer") for r in results}
    expect(
        answers == {notebook_code.digest(source)},
        "results of the stage_dataset in your cell now (its digest)",
        "results of another version: run the exercise cell again",
        what,
    )
    ranks = sorted((r.get("node"), r.get("rank")) for r in results)
    nodes = sorted({node for node, _ in ranks})
    expect(len(ranks) == 4 and len(nodes) == 2, "4 ranks on 2 nodes", ranks, what)
    for r in results:
        if "error" in r:
            raise CheckFailed(f"{what}, rank {r['rank']}: stage_dataset raised {r['error']}")
    copies = staging.copies_per_node(results)
    expect(set(copies.values()) == {1}, "one rank per node reading the archive", copies, what)
    paths = {node: {r["path"] for r in results if r["node"] == node} for node in nodes}
    expect(all(len(p) == 1 for p in paths.values()), "one folder per node", paths, what)
    expect(len({p for s in paths.values() for p in s}) == 2, "a folder for each node", paths, what)
    whole = all(r.get("digest") == _dataset_digest() for r in results)
    expect(whole, f"every rank's copy whole ({small_files.DEFAULT_IMAGES} images)", "not", what)


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


@exercise(
    "10.1",
    "stage the data set once per node, in the job",
    allows=("opens or removes files",),
    reference=(r"staging\.stage\(", r"\bstaging\.unpack\(", *FORGED),
)
def check_stage_dataset(stage_dataset, folder=None, seed: int = 0):
    given = [] if folder is None else [folder]
    got = run_probe(probes.staging_run, stage_dataset, *given)
    if got["stub"]:
        raise NotImplementedError
    if got["source"] is None:
        raise CheckFailed("the source of stage_dataset cannot be read: define it in a cell")
    _folder_given(folder)
    _judge_staging_step(got["results"], got["source"])
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
    return (
        "your function staged the lab's data set once per node in the staging step, and in "
        "the check's own processes: one reader per node, whole copies; SLURM_TMPDIR, else "
        "TMPDIR, else /tmp"
    )


@held_out("10.1", cases=1)
def held_out_staging(rng, stage_dataset, folder=None):
    """Another archive: a copy kept from the visible case, or content made up, fails it."""
    check_stage_dataset(stage_dataset, folder, seed=rng.randrange(1, 2**20))


# ---- 10.2 the scaling job's batch script, driving the study ---------------------------------


def _reproduced(record: dict, what: str) -> None:
    config, losses = record["configuration"], record.get("losses")
    expect(type(losses) is list and len(losses) >= FIRST_LOSSES, "the run's losses", losses, what)
    mine = first_losses(float(config["lr"]), int(config["batch_per_rank"]), FIRST_LOSSES)
    # on the CPU the same steps agree to ~1e-6 whatever the threads; a GPU's convolutions
    # (cuDNN, TF32 by default) differ more
    tol = 5e-3 if config["device"] == "cuda" else 1e-4
    same = all(type(x) is float and math.isclose(x, y, abs_tol=tol) for x, y in zip(losses, mine))
    shown = [round(x, 4) for x in mine]
    expect(same, f"first losses {shown}, as the check trains the same run", losses[:5], what)


def _scheduler_says(record: dict, name: str, text: str, what: str) -> str:
    """sacct's record of a Slurm run: completed, named for this script, on its nodes."""
    job = str(record["label"]["job"])
    steps = [s for s in accounting.ended_job_steps(job) if not s.is_step]
    if not steps:
        expect(shutil.which("sacct") is None, f"sacct's record of job {job}", "none", what)
        return "no accounting here"
    want = cluster.job_name(name, text)
    expect(steps[0].state == "COMPLETED", "a COMPLETED job (sacct)", steps[0].state, what)
    expect(steps[0].name == want, f"the job named {want} (sacct)", steps[0].name, what)
    nodes = record["configuration"]["nodes"]
    expect(steps[0].nodes == nodes, f"{nodes} node(s) (sacct)", steps[0].nodes, what)
    return "sacct"


def _judge_study(records: list[dict], text: str, logs: dict) -> tuple[list[dict], str]:
    """The study's records that came from `text`, judged: the four shapes and the sweep."""
    if not records and logs:
        name, tail = next(iter(logs.items()))
        raise CheckFailed(
            f"your script's runs wrote no record; the last lines of run {name}:\n{tail}"
        )
    if not records:
        raise NotAttempted(STUDY + " at every shape and as the sweep (cluster.study)")
    mine = [r for r in records if r.get("label", {}).get("script") == cluster.digest(text)]
    expect(mine, "records of the script scaling_script returns now", "records of another", STUDY)
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
        _reproduced(r, f"run {r['name']}")
    launchers = {r["label"]["launcher"] for r in mine}
    expect(len(launchers) == 1, "one launcher for the whole study", sorted(launchers))
    for r in mine:  # a job's record is the scheduler's (the message is the same either way)
        if r["label"]["launcher"] == "slurm":
            name = r["name"] if r["study"] == "scaling" else "sweep"
            _scheduler_says(r, name, text, r["name"])
    return sweep, LAUNCHERS[launchers.pop()]


@exercise(
    "10.2",
    "the scaling job's batch script, driving your study",
    reference=(r"lab_scaling\.sh", r"SCRIPTS\[", *FORGED),
)
def check_scaling_script(scaling_script, folder=None):
    text = call_answer(scaling_script)
    expect(type(text) is str, "the script as a str", type(text).__name__)
    problems = scripts.scaling_script_problems(text)
    if problems:
        raise CheckFailed(f"expected {problems[0]}")
    _folder_given(folder)
    found = run_probe(probes.study_records, folder)
    sweep, where = _judge_study(found["records"], text, found["logs"])
    return (
        f"your script ran the four shapes and a sweep of {len(sweep)} learning rates; every "
        "record carries its digest, the 1-rank runs' losses are the check's own, and where the "
        f"runs were Slurm jobs, sacct's record of each agrees {where}"
    )


# ---- 10.3 the transport --------------------------------------------------------------------


def _own_study(folder) -> tuple[list, list]:
    _folder_given(folder)
    records = run_probe(probes.study_records, folder)["records"]
    own = [r for r in records if r.get("study") == "scaling"]
    sweep = [r for r in records if r.get("study") == "sweep"]
    if sum(r.get("configuration", {}).get("ranks") == 1 for r in own) != 1 or not sweep:
        raise NotAttempted(STUDY + ": this check reads your study's records (runs/10/records)")
    for r in own + sweep:
        problems = run_records.validate(r)
        expect(not problems, "a valid record", "; ".join(problems), f"your record {r.get('name')}")
        c, shape = r["configuration"], SHAPES.get(r["name"])
        if shape and r["study"] == "scaling":  # a run of the shape its name says
            expect((c["nodes"], c["ranks"]) == (shape.nodes, shape.ranks), shape, c, r["name"])
        if c["ranks"] == 1:  # a run's, not typed in: the judge trains it too
            _reproduced(r, f"your run {r['name']}")
    return own, sweep


def _own_log(folder) -> str:
    _own_study(folder)  # the log of a study that ran: its 1-rank runs reproduce
    log = run_probe(probes.two_node_log, folder)
    if log is None:
        raise NotAttempted(
            STUDY + ": this check reads your 2-node run's log (records/logs/2x2.log)"
        )
    expect(
        "record 2x2:" in log and transport.links(log),
        "a finished 2-node run's log that names its links",
        "a log without them: did the 2x2 run finish?",
        "your own 2-node run's log",
    )
    return log


def _transport_cases(log: str) -> list[tuple[str, str, str]]:
    recorded = reference.load(cluster.REFERENCE)
    expect(recorded is not None, f"the CI cluster's records ({cluster.REFERENCE}.json)", "none")
    cases = [("your own 2-node run's log", log, transport.diagnose(log))]
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
    "name the transport from your own run's log",
    reference=(r"transport\.diagnose\(", r"transport\.links\(", *FORGED),
)
def check_diagnose_transport(diagnose_transport, folder=None):
    for what, log, want in _transport_cases(_own_log(folder)):
        _named(diagnose_transport, what, log, want)
    return (
        "named the transport in your own 2-node run's log, the CI cluster's, and the "
        "constructed NCCL excerpts"
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


@exercise(
    "10.4",
    "the GPU count and the learning rate, from your own runs",
    reference=(r"scaling\.ranks_to_ask\(", r"scaling\.rates\(", r"scaling\.best_lr\(", *FORGED),
)
def check_decide(decide, folder=None):
    own, sweep = _own_study(folder)
    for what, records, runs, deadline in decide_cases(own, sweep):
        _decided(decide, what, records, runs, deadline)
    return (
        "the GPU count agrees with the course's one decision (how_many.choose) and the "
        "learning rate with your sweep, on your own runs and on every set the check brought"
    )


@held_out("10.4", cases=3)
def held_out_decide(rng, decide, folder=None):
    """Efficiencies, deadlines and sweeps drawn at random: a table of the visible answers fails."""
    own, sweep = _own_study(folder)
    what, records, runs, deadline = decide_cases(own, sweep, rng)[-1]
    _decided(decide, what, records, runs, deadline)
