"""Lesson 10's probes: what its checks run in the learner's process, returning plain data.

The judge (lesson10.py) cannot see the learner's folder nor hold their functions; these probes
run exercise 10.1's function in real processes at the judge's draws and 10.2's script as the
study on this machine, each in a folder the judge made and reads from outside, and read what
the notebook's own runs left in runs/10 (the study's records, the 2-node run's log), which 10.3
and 10.4 decide on. What they report comes from the learner's process: the judge holds it
against what it computes itself (the archive's digest at its seed, the script's digest, the
losses of a 1-rank run it trains itself).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import random
import subprocess
import sys
import uuid
from pathlib import Path

from course_utils import notebook_code, processes
from course_utils.grading import CheckFailed, probe
from course_utils.lab import staging
from course_utils.ranks import NODE_VARIABLE, local_launch_environ

ARCHIVE_FILES, FILE_BYTES = 300, 2048  # the check's own archive: small, yet many files
RANK_SECONDS = 120


def archive_files(seed: int) -> dict[str, bytes]:
    """{name: contents} of the archive the check stages at `seed` (its images/ folder)."""
    rng = random.Random(f"lab-10.1/{seed}")
    return {f"{i:05d}.bin": rng.randbytes(FILE_BYTES) for i in range(ARCHIVE_FILES)}


# ---- 10.1 ----------------------------------------------------------------------------------


def _read_json(folder: Path, pattern: str) -> list:
    found = []
    for path in sorted(folder.glob(pattern)):
        try:
            found.append(json.loads(path.read_text()))
        except ValueError:
            found.append({"unreadable": path.name})
    return found


@probe("10.1/staging")
def staging_run(stage_dataset) -> dict:
    """The learner's function as it stands: its source, and whether it is the stub."""
    try:
        source = notebook_code.source(stage_dataset)
    except ValueError:
        source = None
    return {"stub": notebook_code.is_stub(stage_dataset), "source": source}


def _archive(folder: Path, seed: int) -> Path:
    files = folder / "shared" / staging.IMAGES
    files.mkdir(parents=True)
    for name, data in archive_files(seed).items():
        (files / name).write_bytes(data)
    return staging.make_archive(files, folder / "shared" / staging.ARCHIVE)


def _job_environ(extra: dict) -> dict:
    """This environment without the job and scratch variables it may carry, plus `extra`."""
    env = local_launch_environ().environ
    for name in ("SLURM_TMPDIR", "TMPDIR", "SLURMD_NODENAME", NODE_VARIABLE):
        env.pop(name, None)
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def _ranks(nodes: int, per_node: int, variables: dict, job: str) -> list[dict]:
    """Each rank's job variables; "{node}" in a value becomes the node's number."""
    ranks = []
    for node in range(1, nodes + 1):
        for local in range(per_node):
            ranks.append(
                {
                    **{k: v.format(node=node) for k, v in variables.items()},
                    "SLURM_JOB_ID": job,
                    "SLURMD_NODENAME": f"cn{node}",
                    "SLURM_PROCID": str(len(ranks)),
                    "SLURM_LOCALID": str(local),
                    "SLURM_NTASKS": str(nodes * per_node),
                }
            )
    return ranks


def _report(out: str, env: dict) -> dict:
    who = f"rank {env['SLURM_PROCID']} on {env['SLURMD_NODENAME']}"
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise CheckFailed(f"{who}: stage_dataset ended its process: {out.strip()[-300:]}")
    report = json.loads(lines[-1])
    if report.get("not_attempted"):
        raise NotImplementedError
    return {**report, "who": who, "node": env["SLURMD_NODENAME"]}  # an error is judged later


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
                out, _ = proc.communicate(timeout=RANK_SECONDS)
            except subprocess.TimeoutExpired:
                raise CheckFailed(
                    f"rank {env['SLURM_PROCID']} on {env['SLURMD_NODENAME']} did not return "
                    f"within {RANK_SECONDS} s: does a rank wait for a lock that is never released?"
                ) from None
            reports.append(_report(out, env))
    return reports


@probe("10.1/cases")
def staging_cases(stage_dataset, seed: int, job: str, root: str) -> list[dict]:
    """The learner's function in real processes, one per rank, the ranks of a node released at
    the same moment, on an archive drawn from `seed`: 2 nodes x 2 ranks with SLURM_TMPDIR, 1
    node x 2 with TMPDIR only, the next job on that node, 1 rank with neither. Everything goes
    under `root`, a folder the judge made and reads from outside (but the last case's /tmp).
    Each case: its title, the base the folders belong under, and every rank's report."""
    if notebook_code.is_stub(stage_dataset):
        raise NotImplementedError
    tmp = Path(root)
    try:
        answer = notebook_code.function_module(stage_dataset, "stage_dataset", tmp)
    except ValueError as e:
        raise CheckFailed(str(e)) from e
    archive = _archive(tmp, seed)
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
    found: dict[str, dict] = {}

    def run(case):
        title, ranks, base = case
        reports = _run_ranks(answer, archive, ranks, tmp)
        found[title] = {"title": title, "base": base, "reports": reports}

    # the next job comes after the first on its node; the other cases meanwhile
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        list(pool.map(run, [cases[0], cases[1], cases[3]]))
    run(cases[2])
    return [found[title] for title, _, _ in cases]


# ---- 10.2, 10.3, 10.4: the study's records and logs ----------------------------------------


@probe("10.2/study")
def study_here(scaling_script, root: str) -> str:
    """The study of the learner's script on this machine (`cluster.study`, the local route: the
    four shapes one after another, then the sweep), on the lab's data set written under `root`,
    a folder the judge made, where the records and logs go. What the study said."""
    from course_utils.batch import Launcher
    from course_utils.lab import cluster, small_files

    data = Path(root) / "data"
    small_files.write_dataset(data)
    here = Launcher("local", "the check runs your study on this machine")
    ran = cluster.study(here, scaling_script, data, Path(root) / "records", folder=Path(root))
    return ran.summary()


def study_files(folder: str | Path) -> dict:
    """Every record a study wrote under <folder>/records ({scaling,sweep}/*.json), as they are,
    and the last lines of each run's log (<folder>/records/logs/<run>.log)."""
    records = Path(folder) / "records"
    logs = {
        path.stem: "\n".join(path.read_text(errors="replace").splitlines()[-12:])
        for path in sorted((records / "logs").glob("*.log"))
    }
    found = _read_json(records, "scaling/*.json") + _read_json(records, "sweep/*.json")
    return {"records": found, "logs": logs}


@probe("10.2/records")
def study_records(folder) -> dict:
    """What the study of the notebook's cell on this machine wrote in <folder> (runs/10): its
    records and the last lines of its logs (`study_files`); none where no folder is given."""
    return study_files(folder) if folder is not None else {"records": [], "logs": {}}


@probe("10.3/log")
def two_node_log(folder) -> str | None:
    """The learner's own 2-node run's log: their 2x2 job's (<folder>/jobs/logs/2x2-*.out, the
    newest), else their run's on this machine (<folder>/records/logs/2x2.log); None."""
    if folder is None:
        return None
    jobs = sorted(
        (Path(folder) / "jobs" / "logs").glob("2x2-*.out"), key=lambda p: p.stat().st_mtime
    )
    here = Path(folder) / "records" / "logs" / "2x2.log"
    path = jobs[-1] if jobs else here
    return path.read_text(errors="replace") if path.is_file() else None
