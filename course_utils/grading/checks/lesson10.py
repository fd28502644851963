"""Checkers of lesson 10, the cluster cluster. Each checks what a real run produced.

10.1 runs the learner's staging function in real processes (course_utils.jobs.lab_stage_answer),
     the ranks of a node at the same moment: 2 nodes x 2 ranks with SLURM_TMPDIR, 1 node x 2
     with TMPDIR only, 1 rank with neither; Python's audit hooks count who read the archive.
10.2 reads the learner's scaling script as sbatch does, then runs it at 1 node x 1 task:
     submitted where a Slurm controller answers, else its srun line's program here, one
     local process per rank (cluster.run_script); the record it wrote must carry the script's
     digest.
10.3 names the transport in the learner's own 2-node run's log, in the CI cluster's recorded
     one, and in the constructed NCCL excerpts (nccl_excerpts).
10.4 efficiencies and the rank count, on the learner's own records and on sets the check brings.
Where a check ran is said as "[via slurm]" or "[via local ranks: no Slurm here]"; the
sanitize file's "lab launchers" rule makes the two compare equal.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

from course_utils import batch, processes, reference
from course_utils.batch import NODE_VARIABLE
from course_utils.grading import CheckFailed, call_answer, exercise, expect
from course_utils.grading.checks.lesson05 import _imports_for
from course_utils.lab import cluster, run_records, scaling, scripts, small_files, staging, transport
from course_utils.lab.nccl_excerpts import EXCERPTS
from course_utils.ranks import local_launch_environ

CHECK_SHAPE = batch.Shape(1, 1)  # the set's other sizes come from sbatch's own options


def where(launcher: batch.Launcher) -> str:
    """How a check's run was started, in the words the sanitize file recognises."""
    return "[via slurm]" if launcher.kind == "slurm" else "[via local ranks: no Slurm here]"


# ---- 10.1 the staging step -----------------------------------------------------------------


def _source_module(fn, name: str, folder: Path) -> Path:
    """`fn`'s source as a module of its own, with the imports its names need, as `name`."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError) as e:
        raise CheckFailed(f"the source of {name} cannot be read ({e}); define it in a cell") from e
    if "raise NotImplementedError" in source:
        raise NotImplementedError
    alias = [] if fn.__name__ == name else [f"{name} = {fn.__name__}"]
    path = folder / "answer.py"
    path.write_text("\n".join([*_imports_for(fn), "", textwrap.dedent(source), *alias, ""]))
    return path


def _small_archive(folder: Path) -> Path:
    files = folder / "shared" / "images"
    files.mkdir(parents=True)
    for i in range(300):
        (files / f"{i:05d}.bin").write_bytes(os.urandom(2048))
    return staging.make_archive(files, folder / "shared" / "images.tar")


def _job_environ(extra: dict) -> dict:
    """This environment without the job and scratch variables it may carry, plus `extra`."""
    env = local_launch_environ().environ
    for name in ("SLURM_TMPDIR", "TMPDIR", "SLURMD_NODENAME", NODE_VARIABLE):
        env.pop(name, None)
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def _run_ranks(answer: Path, archive: Path, ranks: list[dict], folder: Path) -> list[dict]:
    """Start one process per rank, release them together, return each one's report."""
    go = folder / f"go-{uuid.uuid4().hex}"
    program = [sys.executable, "-m", "course_utils.jobs.lab_stage_answer", answer, archive, go]
    with contextlib.ExitStack() as stack:
        procs = [
            stack.enter_context(
                processes.started(
                    program,
                    env=_job_environ(env),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
            for env in ranks
        ]
        go.touch()
        reports = []
        for proc, env in zip(procs, ranks):
            try:
                out, _ = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                raise CheckFailed(
                    f"rank {env['SLURM_PROCID']} on {env['SLURMD_NODENAME']} did not return "
                    "within 120 s: does a rank wait for a lock that is never released?"
                ) from None
            reports.append(_report(out, env))
    return reports


def _report(out: str, env: dict) -> dict:
    who = f"rank {env['SLURM_PROCID']} on {env['SLURMD_NODENAME']}"
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise CheckFailed(f"{who}: stage_dataset ended its process: {out.strip()[-300:]}")
    report = json.loads(lines[-1])
    if report.get("not_attempted"):
        raise NotImplementedError
    return {**report, "who": who, "node": env["SLURMD_NODENAME"]}  # an error is judged later


def _ranks(nodes: int, per_node: int, variables: dict, job: str) -> list[dict]:
    """Each rank's job variables; "{node}" in a value becomes the node's number."""
    ranks = []
    for node in range(1, nodes + 1):
        for local in range(per_node):
            mine = {k: v.format(node=node) for k, v in variables.items()}
            ranks.append(
                {
                    **mine,
                    "SLURM_JOB_ID": job,
                    "SLURMD_NODENAME": f"cn{node}",
                    "SLURM_PROCID": str(len(ranks)),
                    "SLURM_LOCALID": str(local),
                    "SLURM_NTASKS": str(nodes * per_node),
                }
            )
    return ranks


def _judge(reports: list[dict], base: str, title: str) -> None:
    """Every rank returned a folder under `base`; one rank per node read the archive; every
    rank's copy was whole when it returned; one folder per node. Two readers on a node are
    judged first: ranks that do not wait for each other unpack over each other's files, and
    the missing lock, not the half-written file or the clash it caused, is what to tell."""
    nodes = sorted({r["node"] for r in reports})
    readers = {
        node: [r["who"] for r in reports if r["node"] == node and r.get("read_archive")]
        for node in nodes
    }

    def one_reader(node):
        expect(
            len(readers[node]) == 1,
            f"one rank of {node} reading the archive",
            f"{len(readers[node])} {readers[node]}: the first rank unpacks while the others "
            "wait for it (a lock), then they use its copy",
            title,
        )

    for node in nodes:
        if len(readers[node]) > 1:
            one_reader(node)
    for r in reports:
        if "error" in r:
            raise CheckFailed(f"{title}, {r['who']}: stage_dataset raised {r['error']}")
    for r in reports:
        node_base = Path(base.format(node=r["node"][2:])).resolve()
        what = f"{title}, {r['who']}"
        expect(r["is_dir"], "the folder of the unpacked data set", repr(r["path"]), what)
        inside = Path(r["path"]).resolve().is_relative_to(node_base)
        expect(inside, f"a folder under {node_base}", r["path"], what)
    for node in nodes:
        one_reader(node)
    for r in reports:
        expect(
            r["whole"] == r["expected"],
            f"all {r['expected']} files of the archive, whole, when stage_dataset returned",
            f"{r['whole']}: a rank must wait until the copy is complete",
            f"{title}, {r['who']}",
        )
    folders = {}
    for node in nodes:
        mine = [r for r in reports if r["node"] == node]
        expect(
            len({r["path"] for r in mine}) == 1,
            f"one folder for all ranks of {node}",
            sorted({r["path"] for r in mine}),
            title,
        )
        folders[node] = mine[0]["path"]
    expect(
        len(set(folders.values())) == len(folders),
        "a folder of its own for each node",
        folders,
        title,
    )


def _cleanup(paths: list[str], job: str, keep: Path) -> None:
    """Remove what the "/tmp" case left outside the check's temporary folder: each returned
    folder, and the folder above it that is named after the check's job, if there is one."""
    for path in map(Path, paths):
        if path.resolve().is_relative_to(keep.resolve()) or not path.is_absolute():
            continue
        shutil.rmtree(path, ignore_errors=True)
        for folder in path.parents:
            if job in folder.name:
                shutil.rmtree(folder, ignore_errors=True)
                break


@exercise("10.1", "stage the data set once per node, in the job")
def check_stage_dataset(stage_dataset):
    expect(callable(stage_dataset), "a function", type(stage_dataset).__name__)
    job = f"check-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="course-10.1-") as tmp:
        tmp = Path(tmp)
        answer, archive = _source_module(stage_dataset, "stage_dataset", tmp), _small_archive(tmp)
        scratch = {
            "SLURM_TMPDIR": f"{tmp}/cn{{node}}/localscratch",
            "TMPDIR": f"{tmp}/cn{{node}}/tmp",
        }
        only_tmpdir = {"TMPDIR": f"{tmp}/t"}
        cases = [
            (
                "2 nodes x 2 ranks, SLURM_TMPDIR set",
                _ranks(2, 2, scratch, job),
                f"{tmp}/cn{{node}}/localscratch",
            ),
            ("1 node x 2 ranks, only TMPDIR set", _ranks(1, 2, only_tmpdir, job + "t"), f"{tmp}/t"),
            (
                "the same node and TMPDIR, the next job",
                _ranks(1, 2, only_tmpdir, job + "u"),
                f"{tmp}/t",
            ),
            ("1 rank, neither variable set", _ranks(1, 1, {}, job + "n"), "/tmp"),
        ]
        made: list[str] = []
        try:
            for title, ranks, base in cases:
                reports = _run_ranks(answer, archive, ranks, tmp)
                made += [r["path"] for r in reports if "path" in r]  # not where one raised
                _judge(reports, base, title)
        finally:
            _cleanup(made, job, tmp)
    return (
        "in real processes, the ranks of a node at once: one rank per node read the archive, "
        "the others waited for the whole copy; SLURM_TMPDIR, else TMPDIR, else /tmp"
    )


# ---- 10.2 the scaling job's batch script -----------------------------------------------------


def _ended(run: batch.Job) -> str:
    if run.returncode is None:
        return "its time limit"
    return processes.exit_description(run.returncode)


def _data(folder: Path) -> Path:
    data = folder / "data"
    small_files.write_dataset(data)
    return data


@exercise("10.2", "the scaling job's batch script, run for real")
def check_scaling_script(scaling_script, folder="runs/10"):
    text = call_answer(scaling_script)
    expect(isinstance(text, str), "the script as a str", type(text).__name__)
    problems = scripts.scaling_script_problems(text)
    if problems:
        raise CheckFailed(f"expected {problems[0]}")
    folder = Path(folder)
    records = folder / "check-records"
    shutil.rmtree(records, ignore_errors=True)  # only this run's record counts
    launcher = batch.find_launcher()
    run = cluster.run_script(text, CHECK_SHAPE, launcher, _data(folder), records, folder / "check")
    if not run.ok:
        raise CheckFailed(
            f"your script at 1 node x 1 task ended with {_ended(run)} {where(launcher)}; its "
            f"last lines:\n{run.tail()}"
        )
    try:
        found = run_records.load(records, "check")
    except ValueError as e:
        raise CheckFailed(f"its record is not valid {where(launcher)}: {e}") from e
    mine = [r for r in found if r["label"]["script"] == cluster.digest(text)]
    expect(
        len(mine) == 1,
        "one record from this script (its digest in the label)",
        [r["label"]["script"] for r in found],
    )
    ranks = (mine[0]["configuration"]["nodes"], mine[0]["configuration"]["ranks"])
    expect(ranks == (1, 1), "1 node and 1 rank in the record", ranks)
    return (
        "the header read as sbatch reads it, srun gets its CPUs and GPU binding, and it ran "
        f"and wrote a valid record {where(launcher)}"
    )


# ---- 10.3 the transport ----------------------------------------------------------------------


NOT_YET = "no {what} of yours yet in {where}: run the study above, then check again"


def _transport_cases(folder: Path) -> list[tuple[str, str, str]]:
    """(what, log, expected kind): the learner's own 2-node run (when there is one), the CI
    cluster's, the constructed excerpts."""
    own = folder / "records" / "logs" / "2x2.log"
    cases = []
    if own.is_file():
        log = own.read_text()
        cases.append(("your own 2-node run's log", log, transport.diagnose(log)))
    recorded = reference.load(cluster.REFERENCE)
    expect(
        recorded is not None,
        f"the CI cluster's records ({cluster.REFERENCE}.json)",
        "none (is the package installed whole?)",
    )
    log = recorded["logs"]["2x2"]
    cases.append(("the CI cluster's 2-node log", log, transport.diagnose(log)))
    cases += [(f"the constructed excerpt {name!r}", e.text, e.kind) for name, e in EXCERPTS.items()]
    return cases


@exercise("10.3", "name the transport from a log")
def check_diagnose_transport(diagnose_transport, folder="runs/10"):
    cases = _transport_cases(Path(folder))
    for what, log, want in cases:
        got = call_answer(diagnose_transport, log)
        expect(got in transport.KINDS, f"one of {list(transport.KINDS)}", repr(got), what)
        hint = ""
        if got != want and want in transport.NETWORK_ORDER and got in transport.NODE_ORDER:
            hint = ": across nodes the network link decides, not the links within a node"
        expect(got == want, repr(want), f"{got!r}{hint}", what)
    if not cases[0][0].startswith("your own"):
        where_ = Path(folder) / "records" / "logs" / "2x2.log"
        return "named the transport in the logs the check brought; " + NOT_YET.format(
            what="2-node log", where=where_
        )
    return (
        "named the transport in your own 2-node run's log, the CI cluster's, and the "
        "constructed NCCL excerpts"
    )


# ---- 10.4 how many GPUs ----------------------------------------------------------------------


def _with_throughputs(records: list[dict], efficiencies: dict[str, float]) -> list[dict]:
    """Copies of `records` whose throughputs give these efficiencies (by run name)."""
    base = next(r for r in records if r["configuration"]["ranks"] == 1)["throughput"]
    out = []
    for r in records:
        r = copy.deepcopy(r)
        r["throughput"] = base * r["configuration"]["ranks"] * efficiencies.get(r["name"], 1.0)
        out.append(r)
    return out


def _decide_cases(folder: Path) -> list[tuple[str, list[dict], float]]:
    try:
        own = run_records.load(folder / "records", "scaling")
    except ValueError as e:
        raise CheckFailed(f"your records: {e}") from e
    if not any(r["configuration"]["ranks"] == 1 for r in own):
        own = []  # no study of yours (yet): the check's own sets only
    recorded = reference.load(cluster.REFERENCE)
    expect(
        recorded is not None,
        f"the CI cluster's records ({cluster.REFERENCE}.json)",
        "none (is the package installed whole?)",
    )
    brought = recorded["records"]
    shapes = {
        "a cliff at 2 nodes": {"1x2": 0.95, "1x4": 0.85, "2x2": 0.4},
        "super-linear at 2 ranks": {"1x2": 1.1, "1x4": 0.7, "2x2": 0.75},
        "every run efficient": {"1x2": 0.98, "1x4": 0.9, "2x2": 0.92},
        "nothing scales": {"1x2": 0.45, "1x4": 0.3, "2x2": 0.2},
    }
    cases = [("your own records", own, 0.8), ("your own records, threshold 0.5", own, 0.5)]
    cases = cases if own else []
    cases += [("the CI cluster's records", brought, 0.8)]
    cases += [
        (f"records with {name}", _with_throughputs(brought, eff), 0.8)
        for name, eff in shapes.items()
    ]
    return cases


@exercise("10.4", "efficiency and the GPU count from records")
def check_decide(decide, folder="runs/10"):
    cases = _decide_cases(Path(folder))
    for what, records, threshold in cases:
        rows = scaling.scaling_rows(records)
        got = call_answer(decide, copy.deepcopy(records), threshold)
        expect(
            isinstance(got, tuple) and len(got) == 2,
            "a tuple (efficiencies, ranks)",
            repr(got),
            what,
        )
        efficiencies, ranks = got
        want = {row.name: row.efficiency for row in rows}
        expect(
            isinstance(efficiencies, dict) and set(efficiencies) == set(want),
            f"an efficiency for each run {sorted(want)}",
            repr(efficiencies),
            what,
        )
        for name, value in want.items():
            ok = isinstance(efficiencies[name], (int, float)) and math.isclose(
                efficiencies[name], value, rel_tol=1e-6
            )
            expect(
                ok,
                f"{value:.4f} for {name} (speed-up over 1 rank / ranks)",
                efficiencies[name],
                what,
            )
        best = scaling.ranks_to_ask(rows, threshold).ranks
        expect(
            ranks == best,
            f"{best} ranks (the most whose efficiency is at least {threshold:.0%})",
            ranks,
            what,
        )
    if not cases[0][0].startswith("your own"):
        return (
            "efficiencies and the rank count agree with the rule on the sets the check "
            "brought; " + NOT_YET.format(what="scaling records", where=Path(folder) / "records")
        )
    return (
        "efficiencies and the rank count agree with the rule on your own records and on "
        "every set the check brought"
    )
