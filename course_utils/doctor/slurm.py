"""`course doctor` inside a Slurm job: the job this process lives in (id, CPUs, GPUs, memory, time
left) and what in its variables would break a launch on this node from here (taught in lesson
00; lesson 05 launches from a kernel).

A centre's JupyterHub starts a learner's server as a job: as an srun step (batchspawner's
SlurmSpawner) or in the batch script itself, often with cores asked as tasks (Open OnDemand).
The kernel inherits the job's variables. `job_findings` and `launch_findings` are pure functions
of those variables and of `scontrol show job`'s text; `slurm_job` reads both here, scontrol
through `processes.run`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import datetime, timedelta

from course_utils import processes
from course_utils.doctor.findings import INFO, OK, WARN, Finding
from course_utils.ranks import LAUNCHER_VARS

NOT_REPORTED = "not reported"
# Less time than this left in the job: the report says to save (a job past its limit is killed).
LOW_TIME = timedelta(minutes=10)
# scontrol's fields that name GPUs a job asked for (gres:gpu:1, gres/gpu=2, gres:gpu:a100:1).
GPU_FIELDS = ("TresPerNode", "TresPerJob", "TresPerTask", "AllocTRES", "TRES")
GPU_SPEC = re.compile(r"gres[:/]gpu(?::[\w.-]+)?[:=](\d+)")


def parse_scontrol(text: str) -> dict[str, str]:
    """`scontrol show job`'s Key=Value pairs, the first of each key ("TRES" -> "cpu=4,node=1")."""
    fields: dict[str, str] = {}
    for key, value in re.findall(r"(\S+?)=(\S*)", text):
        fields.setdefault(key, value)
    return fields


def _count(n: int | str, word: str) -> str:
    return f"{n} {word}" if str(n) == "1" else f"{n} {word}s"


def job_line(environ: Mapping[str, str], fields: Mapping[str, str]) -> str:
    """ "7 (jupyter) on cn1, in step 0 (srun)": the job and where this process runs in it."""
    name = environ.get("SLURM_JOB_NAME") or fields.get("JobName") or "unnamed"
    node = environ.get("SLURMD_NODENAME") or fields.get("BatchHost") or "a node not reported"
    step = environ.get("SLURM_STEP_ID")
    where = (
        f"in step {step} (srun)"
        if step is not None
        else "outside any step (the batch script itself, or salloc's shell)"
    )
    return f"{environ['SLURM_JOB_ID']} ({name}) on {node}, {where}"


def job_cpus(environ: Mapping[str, str], fields: Mapping[str, str]) -> str:
    """CPUs on this node, and how the job asked for them: tasks x CPUs per task."""
    parts = []
    if environ.get("SLURM_CPUS_ON_NODE"):
        parts.append(f"{environ['SLURM_CPUS_ON_NODE']} on this node")
    elif fields.get("NumCPUs"):
        parts.append(f"{fields['NumCPUs']} in the job")
    tasks = environ.get("SLURM_NTASKS") or fields.get("NumTasks")
    per_task = environ.get("SLURM_CPUS_PER_TASK") or fields.get("CPUs/Task")
    if tasks and per_task:
        parts.append(f"{_count(tasks, 'task')} x {_count(per_task, 'CPU')}")
    elif tasks:
        parts.append(_count(tasks, "task"))
    return ", ".join(parts) or NOT_REPORTED


def job_gpus(environ: Mapping[str, str], fields: Mapping[str, str]) -> str:
    """GPUs on this node (the job's variables), else what scontrol says the job asked for."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    shown = f", CUDA_VISIBLE_DEVICES={visible}" if visible is not None else ""
    if environ.get("SLURM_GPUS_ON_NODE"):
        return f"{environ['SLURM_GPUS_ON_NODE']} on this node{shown}"
    ids = environ.get("SLURM_STEP_GPUS") or environ.get("SLURM_JOB_GPUS")
    if ids:
        return f"{len(ids.split(','))} on this node (ids {ids}){shown}"
    asked = [f"{k}={fields[k]}" for k in GPU_FIELDS if GPU_SPEC.search(fields.get(k, ""))]
    if asked:
        return asked[0] + shown
    if fields:  # scontrol answered and names no GPU: the job asked for none
        return "none asked for" + shown
    return NOT_REPORTED + shown


def job_memory(environ: Mapping[str, str], fields: Mapping[str, str]) -> str:
    """The job's memory limit, from its variables (MB), else from scontrol."""
    for name, per in (
        ("SLURM_MEM_PER_NODE", "node"),
        ("SLURM_MEM_PER_CPU", "CPU"),
        ("SLURM_MEM_PER_GPU", "GPU"),
    ):
        if environ.get(name):
            return f"{environ[name]} MB per {per} ({name})"
    for name, per in (("MinMemoryNode", "node"), ("MinMemoryCPU", "CPU")):
        if fields.get(name, "0") not in ("0", ""):  # 0: none asked for, the partition's default
            return f"{fields[name]} per {per} (scontrol {name})"
    return NOT_REPORTED


def _end_time(environ: Mapping[str, str], fields: Mapping[str, str]) -> datetime | None:
    if environ.get("SLURM_JOB_END_TIME", "").isdigit():  # Slurm 23.02 and newer set it
        return datetime.fromtimestamp(int(environ["SLURM_JOB_END_TIME"]))
    try:
        return datetime.fromisoformat(fields.get("EndTime", ""))
    except ValueError:  # "Unknown", or no scontrol
        return None


def job_time_left(
    environ: Mapping[str, str], fields: Mapping[str, str], now: datetime
) -> tuple[str, timedelta | None]:
    """("0:27:13 left of 00:30:00, ends 2026-11-25T20:32:59", the time left) or why not known."""
    if fields.get("TimeLimit") == "UNLIMITED":
        return "no time limit (scontrol TimeLimit=UNLIMITED)", None
    end = _end_time(environ, fields)
    if end is None:
        return NOT_REPORTED, None
    left = max(end - now, timedelta(0))
    limit = f" of {fields['TimeLimit']}" if fields.get("TimeLimit") else ""
    left_text = str(timedelta(seconds=int(left.total_seconds())))
    return f"{left_text} left{limit}, ends {end.isoformat(timespec='seconds')}", left


def job_findings(environ: Mapping[str, str], scontrol: str | None, now: datetime) -> list[Finding]:
    """The job this process is in, from its variables and `scontrol show job`'s text (None where
    scontrol is missing or did not answer). Each figure says "not reported" where nothing says."""
    if not environ.get("SLURM_JOB_ID"):
        return [Finding("slurm job", "not in a Slurm job (no SLURM_JOB_ID)", INFO)]
    fields = parse_scontrol(scontrol) if scontrol else {}
    no_scontrol = "" if scontrol else "scontrol show job did not answer: the job's variables only"
    time_text, left = job_time_left(environ, fields, now)
    low = left is not None and left < LOW_TIME
    return [
        Finding("slurm job", job_line(environ, fields), OK, no_scontrol),
        Finding("job cpus", job_cpus(environ, fields), INFO),
        Finding("job gpus", job_gpus(environ, fields), INFO),
        Finding("job memory", job_memory(environ, fields), INFO),
        Finding(
            "job time left",
            time_text,
            WARN if low else INFO,
            "save your work now: the job is killed at its limit (lesson 06 checkpoints)"
            if low
            else "",
        ),
    ]


def _int(environ: Mapping[str, str], name: str) -> int:
    value = environ.get(name, "")
    return int(value) if value.isdigit() else 1


def _lightning_says(environ: Mapping[str, str], asked: str) -> str:
    """What Lightning does in a kernel with these variables (its SLURMEnvironment's checks)."""
    if environ.get("SLURM_JOB_NAME") in ("bash", "interactive"):
        return "Lightning leaves a job named bash or interactive alone (its interactive mode). "
    if environ.get("SLURM_NTASKS_PER_NODE"):
        return (
            "Lightning here refuses Trainer(devices=2): 'the number of tasks per node configured "
            f"in SLURM `{asked}` does not match'. "
        )
    return (
        f"Lightning here refuses to start: 'You set `{asked}` in your SLURM bash script, but "
        "this variable is not supported'. "
    )


def tasks_finding(environ: Mapping[str, str]) -> Finding | None:
    """A warning where the job asked for several tasks (or nodes) but this is one process."""
    tasks, nodes = _int(environ, "SLURM_NTASKS"), _int(environ, "SLURM_NNODES")
    if not environ.get("SLURM_JOB_ID") or (tasks == 1 and nodes == 1):
        return None
    per_node = environ.get("SLURM_NTASKS_PER_NODE")
    names = [f"SLURM_NTASKS={tasks}"] + [f"SLURM_NTASKS_PER_NODE={per_node}"] * bool(per_node)
    names += [f"SLURM_NNODES={nodes}"] * (nodes > 1)
    asked = f"--ntasks-per-node={per_node}" if per_node else f"--ntasks={tasks}"
    cpus = environ.get("SLURM_CPUS_ON_NODE") or str(tasks)
    return Finding(
        "local launch",
        f"{', '.join(names)}: the job's {tasks} tasks; a launch from here that reads these "
        "variables takes them for its own",
        WARN,
        f"{_lightning_says(environ, asked)}Fix: where the server starts, ask for cores as CPUs "
        f"(--ntasks=1 --cpus-per-task={cpus}); or launch with "
        "env=ranks.local_launch_environ().environ, as the course's launchers do",
    )


def stale_launcher_finding(environ: Mapping[str, str]) -> Finding | None:
    """A warning where a launcher's variables (RANK, WORLD_SIZE, ...) reached this process."""
    stale = [name for name in LAUNCHER_VARS if name in environ]
    if not stale:
        return None
    shown = ", ".join(f"{name}={environ[name]}" for name in stale)
    return Finding(
        "local launch",
        f"{shown}: a launcher's variables, set where this process started",
        WARN,
        "torch.distributed here takes this process for that rank and waits for the others; a "
        "launch of your own from here inherits them (the course's launchers set them aside). "
        "Fix: unset them where the server starts (unset "
        f"{' '.join(stale)}), or in the notebook: "
        f"for v in {tuple(stale)}: os.environ.pop(v, None)",
    )


def launch_findings(environ: Mapping[str, str]) -> list[Finding]:
    """What in this process's variables would break a launch on this node from here."""
    found = [tasks_finding(environ), stale_launcher_finding(environ)]
    return [f for f in found if f is not None]


def scontrol_show_job(job_id: str) -> str | None:
    """`scontrol show job JOB_ID`'s text, or None where scontrol is missing or fails."""
    try:
        done = processes.run(["scontrol", "show", "job", job_id], timeout=10)
    except OSError:  # no scontrol on this node
        return None
    return done.stdout if done.ok else None


def slurm_job(environ: Mapping[str, str] | None = None) -> list[Finding]:
    """The job rows and the launch warnings for this process."""
    environ = os.environ if environ is None else environ
    job = environ.get("SLURM_JOB_ID")
    text = scontrol_show_job(job) if job else None
    return job_findings(environ, text, datetime.now()) + launch_findings(environ)
