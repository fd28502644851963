"""Slurm's accounting record of a job: what `sacct` says, and the efficiencies `seff` computes.

Taught in lesson 10 (the learner's own jobs: how well did they use what they asked for?) and
read in lessons 00, 05 and 09, where a check grades a job: the scheduler's record is one the
learner's code cannot write.

    steps = accounting.job_steps("1234")     # the job and each step, from sacct
    e = accounting.efficiency(steps)          # CPU and memory efficiency, as seff computes them

`parse_sacct` is a pure function of sacct's text (tested with Slurm's answers injected);
`job_steps` asks sacct through `processes.run`. Where a cluster keeps no accounting, sacct
fails and `job_steps` returns [] (say so; never guess).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from course_utils import processes

FIELDS = (
    "JobID",
    "JobName",
    "State",
    "ExitCode",
    "Elapsed",
    "AllocCPUS",
    "ReqMem",
    "MaxRSS",
    "TotalCPU",
    "AllocTRES",
    "NNodes",
    "NTasks",
)
_UNITS = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2}


@dataclass(frozen=True)
class Step:
    """One line of sacct: the job itself (`job_id` "1234"), or a step ("1234.batch", "1234.0")."""

    job_id: str
    name: str
    state: str  # COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, RUNNING, PENDING, ...
    exit_code: int  # the first number of ExitCode ("0:0"); a signal is the second
    elapsed_s: float
    alloc_cpus: int
    req_mem_mb: float | None  # the job's request (on the job's own line)
    max_rss_mb: float | None  # the step's peak resident memory (steps only)
    total_cpu_s: float  # CPU time used (user + system)
    alloc_tres: dict[str, str]
    nodes: int
    tasks: int | None

    @property
    def is_step(self) -> bool:
        return "." in self.job_id


def seconds(text: str) -> float:
    """sacct's durations: "00:00:03", "1-02:03:04", "01:23.456" (MM:SS.mmm), "" -> 0."""
    text = text.strip()
    if not text or text in ("INVALID", "UNLIMITED"):
        return 0.0
    days, _, rest = text.rpartition("-")
    parts = [float(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    hours, minutes, secs = parts
    return (int(days) if days else 0) * 86400 + hours * 3600 + minutes * 60 + secs


def megabytes(text: str) -> float | None:
    """sacct's sizes: "63836K", "500M", "2G", "0" -> MB; "" -> None. A ReqMem ends in n or c
    per node or per CPU in older Slurm; the unit is what counts here."""
    m = re.match(r"^([\d.]+)([KMGT]?)[nc]?$", text.strip())
    if not m:
        return None
    return float(m[1]) * _UNITS.get(m[2] or "M", 1.0)


def parse_sacct(text: str) -> list[Step]:
    """The lines of `sacct --parsable2 --noheader --format=<FIELDS>`."""
    steps = []
    for line in text.strip().splitlines():
        values = line.split("|")
        if len(values) != len(FIELDS):
            continue
        row = dict(zip(FIELDS, values))
        tres = dict(p.split("=", 1) for p in row["AllocTRES"].split(",") if "=" in p)
        code = row["ExitCode"].split(":")[0]
        steps.append(
            Step(
                job_id=row["JobID"],
                name=row["JobName"],
                state=row["State"].split()[0] if row["State"] else "",
                exit_code=int(code) if code.isdigit() else 0,
                elapsed_s=seconds(row["Elapsed"]),
                alloc_cpus=int(row["AllocCPUS"] or 0),
                req_mem_mb=megabytes(row["ReqMem"]),
                max_rss_mb=megabytes(row["MaxRSS"]),
                total_cpu_s=seconds(row["TotalCPU"]),
                alloc_tres=tres,
                nodes=int(row["NNodes"] or 0),
                tasks=int(row["NTasks"]) if row["NTasks"].isdigit() else None,
            )
        )
    return steps


def job_steps(job_id: str, timeout: float = 30) -> list[Step]:
    """The job and its steps as sacct records them ([] where there is no accounting)."""
    return _sacct(job_id, timeout) or []


def _sacct(job_id: str, timeout: float = 30) -> list[Step] | None:
    """sacct's record of the job; None where sacct itself fails (no sacct, or a cluster that
    keeps no accounting), which no wait will change."""
    cmd = ["sacct", "--parsable2", "--noheader", "-j", str(job_id), f"--format={','.join(FIELDS)}"]
    try:
        done = processes.run(cmd, timeout=timeout)
    except OSError:  # no sacct on this machine
        return None
    return parse_sacct(done.stdout) if done.ok else None


# States of a job or step that sacct may still change: slurmdbd records a job's end a moment
# after the job has left the queue, and its steps one by one.
ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED")
SETTLE_POLL = 1.0  # seconds between two readings of a record that is not final yet
SETTLE_WAIT = 20.0  # seconds after which the record is taken as it stands


def ended_job_steps(job_id: str, wait: float | None = None) -> list[Step]:
    """The record of a job that has left the queue, once sacct holds it whole: the job's line and
    every step in a final state. After `wait` seconds (SETTLE_WAIT), what sacct holds then ([]
    for none): the judge that reads it says what is missing."""
    deadline = time.monotonic() + (SETTLE_WAIT if wait is None else wait)
    while True:
        steps = _sacct(job_id)
        if steps is None:  # no accounting: nothing to wait for
            return []
        final = steps and any(not s.is_step for s in steps)
        if final and not any(s.state in ACTIVE for s in steps):
            return steps
        if time.monotonic() >= deadline:
            return steps
        time.sleep(SETTLE_POLL)


@dataclass(frozen=True)
class Efficiency:
    job_id: str
    state: str
    elapsed_s: float
    cpus: int
    cpu_s: float  # the steps' TotalCPU, summed
    cpu: float | None  # TotalCPU / (Elapsed x AllocCPUS), as seff computes it
    memory_mb: float | None  # the largest step's MaxRSS x its tasks
    requested_mb: float | None
    memory: float | None  # memory_mb / requested_mb


def efficiency(steps: list[Step]) -> Efficiency:
    """seff's formulas on one job's records: CPU efficiency is the steps' CPU time over the
    job's wall time times its CPUs; memory efficiency is the largest step's peak (MaxRSS times
    that step's tasks) over the memory the job was given (AllocTRES's mem)."""
    jobs = [s for s in steps if not s.is_step]
    if not jobs:
        raise ValueError("no job line among the records: pass sacct's lines for one job")
    job = jobs[0]
    cpu_s = sum(s.total_cpu_s for s in steps if s.is_step) or job.total_cpu_s
    wall = job.elapsed_s * job.alloc_cpus
    peaks = [s.max_rss_mb * (s.tasks or 1) for s in steps if s.is_step and s.max_rss_mb]
    memory = max(peaks) if peaks else None
    # what the job was given: AllocTRES's mem (all nodes together), else its ReqMem
    requested = megabytes(job.alloc_tres.get("mem", "")) or job.req_mem_mb
    return Efficiency(
        job_id=job.job_id,
        state=job.state,
        elapsed_s=job.elapsed_s,
        cpus=job.alloc_cpus,
        cpu_s=cpu_s,
        cpu=cpu_s / wall if wall else None,
        memory_mb=memory,
        requested_mb=requested,
        memory=memory / requested if memory is not None and requested else None,
    )


# ---- whose job, when, and what it ran --------------------------------------------------------

# SubmitLine last: a command line may hold a "|", which then stays in it.
OWNER_FIELDS = (
    "JobID",
    "User",
    "Account",
    "Submit",
    "State",
    "Start",
    "End",
    "NodeList",
    "Comment",
    "SubmitLine",
)


@dataclass(frozen=True)
class JobRecord:
    """What Slurm's accounting holds about one job beyond its steps: who submitted it, on which
    account and when, every run of it (a requeued job ran more than once: `sacct --duplicates`),
    the batch script Slurm stored (AccountingStoreFlags=job_script) and the steps of its last run;
    when its last run started and ended and on which nodes (sacct's compact list, "cn[1-2]"). An
    array's tasks are jobs of their own ("4217_0"). Read by the grading of lessons 00, 05, 06, 09
    and 10: a record the learner's code cannot write."""

    job_id: str
    user: str
    account: str
    submitted: str  # ISO time, as sacct prints it (2026-11-29T08:01:02)
    submit_line: str  # the sbatch command line, arguments included
    comment: str  # what the job left in its comment (witness.to_job_record)
    runs: tuple[str, ...]  # the state of each run, oldest first (REQUEUED, ..., COMPLETED)
    step_lines: tuple[str, ...]  # the command line of each step of the last run (srun ...)
    script: str | None  # None where Slurm stored none
    steps: tuple[Step, ...]
    started: str = ""  # ISO time of the last run's start ("" before it started)
    ended: str = ""  # ISO time of its end ("" while it runs)
    nodelist: str = ""  # its nodes as sacct prints them ("cn[1-2]"; "" before it has any)

    @property
    def state(self) -> str:
        return self.runs[-1] if self.runs else ""


def parse_owners(text: str) -> list[dict[str, str]]:
    """The lines of `sacct --duplicates --format=<OWNER_FIELDS>`, in order, each {field: value}
    (State's first word): each run's job line, then its steps' ("4217.0")."""
    rows = []
    for line in text.strip().splitlines():
        values = line.split("|", len(OWNER_FIELDS) - 1)
        if len(values) == len(OWNER_FIELDS):
            row = dict(zip(OWNER_FIELDS, values))
            row["State"] = row["State"].split()[0] if row["State"] else ""
            rows.append(row)
    return rows


_SCRIPT_HEADER = re.compile(r"^Batch Script for (\S+)\s*$")


def parse_batch_scripts(text: str) -> dict[str, str]:
    """{job id: script} from `sacct --batch-script` output: one section per job, each a header
    ("Batch Script for 4217_0"), a rule, then the script as sbatch stored it (an array's tasks
    each have theirs). A job whose script Slurm did not store ("NONE") is left out."""
    found: dict[str, list[str]] = {}
    job, lines = None, text.splitlines()
    for i, line in enumerate(lines):
        header = _SCRIPT_HEADER.match(line)
        if header and i + 1 < len(lines) and lines[i + 1].startswith("-----"):
            job = header[1]
            found[job] = []
        elif job is not None and not (line.startswith("-----") and not found[job]):
            found[job].append(line)
    scripts = {}
    for job, body in found.items():
        script = "\n".join(body).strip("\n")
        if script and script != "NONE":
            scripts[job] = script + "\n"
    return scripts


def parse_batch_script(text: str) -> str | None:
    """The (first) script in `sacct --batch-script` output, or None."""
    scripts = parse_batch_scripts(text)
    return next(iter(scripts.values()), None)


def _base(job_id: str) -> str:
    """The job a line of sacct belongs to: "4217" for 4217.batch, "4217_0" for 4217_0.0."""
    return job_id.split(".")[0]


def job_records(job_id: str, timeout: float = 30) -> list[JobRecord]:
    """Slurm's accounting of `job_id`, settled (`ended_job_steps`): one record for a job, one per
    task for an array named by its id (4217_0, 4217_1, ...; tasks not started yet are one
    line, "4217_[2-3%2]"); [] where sacct knows no such job, or keeps no accounting. Read as the
    user who asks: with PrivateData=jobs, only their own jobs, or those of the accounts they
    coordinate."""
    steps = ended_job_steps(job_id)
    if not steps:
        return []
    cmd = ["sacct", "--parsable2", "--noheader", "--duplicates", "-j", str(job_id)]
    owners = processes.run([*cmd, f"--format={','.join(OWNER_FIELDS)}"], timeout=timeout)
    rows = parse_owners(owners.stdout) if owners.ok else []
    stored = processes.run(["sacct", "--batch-script", "-j", str(job_id)], timeout=timeout)
    scripts = parse_batch_scripts(stored.stdout) if stored.ok else {}
    groups: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault(_base(row["JobID"]), []).append(row)
    records = []
    for job, group in groups.items():
        starts = [i for i, row in enumerate(group) if "." not in row["JobID"]]
        if not starts:
            continue
        last = group[starts[-1]]
        script = scripts.get(job)
        if script is None and len(groups) == 1 and len(scripts) == 1:
            script = next(iter(scripts.values()))  # one job, one script, under another name
        records.append(
            JobRecord(
                job_id=job,
                user=last["User"],
                account=last["Account"],
                submitted=last["Submit"],
                submit_line=last["SubmitLine"],
                comment=last["Comment"],
                runs=tuple(group[i]["State"] for i in starts),
                step_lines=tuple(row["SubmitLine"] for row in group[starts[-1] + 1 :]),
                script=script,
                steps=tuple(s for s in steps if _base(s.job_id) == job),
                started=_time(last["Start"]),
                ended=_time(last["End"]),
                nodelist="" if last["NodeList"] == "None assigned" else last["NodeList"],
            )
        )
    return records


def _time(text: str) -> str:
    """sacct's time, or "" where it has none yet ("Unknown", "None")."""
    return text if text[:1].isdigit() else ""


def job_record(job_id: str, timeout: float = 30) -> JobRecord | None:
    """Slurm's accounting of the one job `job_id` (`job_records`); None where sacct knows no
    such job, or keeps no accounting, or `job_id` names an array of several tasks."""
    records = job_records(job_id, timeout)
    if len(records) == 1:
        return records[0]
    return next((r for r in records if r.job_id == str(job_id)), None)
