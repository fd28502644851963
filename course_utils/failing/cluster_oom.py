"""Out of memory in a Slurm job, for real: submit it, record it, show it (lesson 09).

Each `Case` is one job of course_utils.jobs.loader_memory: four DataLoader workers that each
copy 256 MiB of images into a job allowed 1 GiB, then the same job with each fix (workers that
share the file, one worker, a --mem that holds the copies), and once with Python started by the
batch script itself instead of srun (bash then reports the SIGKILL as exit code 137).
`run_on_cluster` submits them through `batch.submit` (the course's one way to submit and wait)
and keeps each job's output file, exit code, Slurm's verdict (the scheduler's record: sacct's
state and exit code of the job and of each step) and the kernel's log lines about the job
(`dmesg`, which clusters seldom let users read). `record` writes a run to
course_utils/reference/ with its label, paths as a learner reads them; `for_lesson` runs the
srun cases as steps of the job the notebook's kernel runs in, and elsewhere (a laptop, a grading
sandbox, CI's notebook run) gives the recorded run and says so.
"""

from __future__ import annotations

import datetime
import os
import re
import shlex
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from course_utils import batch, paths, processes, reference
from course_utils.failing import job_memory
from course_utils.files import atomic_write_text

PROGRAM = "course_utils.jobs.loader_memory"
SCRIPT = "slurm/loader_oom.sh"
RECORD = "cluster_loader_oom"  # course_utils/reference/cluster_loader_oom.json
IMAGES_MIB = 256  # each worker's copy; 4 of them and the main process do not fit in 1 GiB


@dataclass(frozen=True)
class Case:
    name: str
    mem: str  # the job's --mem
    program: tuple[str, ...]  # options of loader_memory
    srun: bool = True  # False: the batch script starts python itself

    def command(self) -> str:
        """The line a learner types, from the course folder."""
        options = " ".join(self.program)
        if self.srun:
            return f"sbatch --mem={self.mem} {SCRIPT} {options}"
        return f"sbatch --mem={self.mem} --wrap '{self.wrap('python', options)}'"

    @staticmethod
    def wrap(python: str, options: str) -> str:
        """The batch script of a job that starts python itself, and says its exit code."""
        return f'{python} -m {PROGRAM} {options}; echo "exit code of python: $?"'


CASES = (
    Case("copies", "1G", ("--open", "copy")),
    Case("shares", "1G", ("--open", "mmap")),
    Case("one worker", "1G", ("--open", "copy", "--workers", "1")),
    Case("more memory", "2G", ("--open", "copy")),
    Case("no srun", "1G", ("--open", "copy"), srun=False),
)


@dataclass(frozen=True)
class JobRun:
    """One job as its user sees it afterwards."""

    case: str
    command: str
    exit_code: int | None  # the job's, None when it did not end in time
    state: str  # Slurm's verdict: "JobState=OUT_OF_MEMORY ExitCode=0:125", or "" when gone
    output: str  # the job's output file
    kernel: tuple[str, ...] = ()  # the kernel's lines about processes it killed in the job

    def report(self) -> job_memory.OomReport:
        return job_memory.oom_report(self.output)

    def killed(self) -> list[str]:
        """Who the kernel killed, by the roles the program printed ("main process (pid 5)")."""
        return job_memory.killed_roles(self.output, self.kernel)


def job_script(case: Case, images: Path) -> tuple[Path, list[str]]:
    """The batch script `case` submits and its arguments: slurm/loader_oom.sh for the srun
    cases, else a script of its own whose body starts python itself (the script --wrap writes)."""
    program = [*case.program, "--data", str(images)]
    if case.srun:
        return paths.course_file(SCRIPT), program
    body = Case.wrap(shlex.quote(sys.executable), shlex.join(program))
    header = "#SBATCH --time=00:05:00\n#SBATCH --cpus-per-task=4\n"
    script = images.parent / f"{case.name.replace(' ', '-')}.sh"
    atomic_write_text(script, f"#!/bin/sh\n{header}{body}\n")  # as --wrap writes it
    return script, []


def slurm_state(job: batch.Job) -> str:
    """ "JobState=... ExitCode=N" from the scheduler's record (sacct), and each step's state."""
    if not job.state:
        return ""
    line = next((s for s in job.steps if not s.is_step), None)
    said = f"JobState={job.state}" + (f" ExitCode={line.exit_code}" if line else "")
    steps = [f"{s.job_id}={s.state}" for s in job.steps if s.is_step]
    return said + (f" Steps: {' '.join(steps)}" if steps else "")


def kernel_lines(
    job_id: str, log: str | None = None, pids: set[str] | None = None
) -> tuple[str, ...]:
    """The kernel's "Killed process PID (name) ..." lines for processes of job `job_id`
    (its oom-kill line names the job's cgroup), and of `pids` when given: the processes the
    job's output names. A job id comes back when a controller starts afresh (the test cluster,
    each time it starts), and the kernel's log still holds the kills of the older job of that
    id. Empty where dmesg is not readable."""
    if log is None:
        done = processes.run(["dmesg"], timeout=30)
        log = done.stdout if done.ok else ""
    in_job = set(re.findall(rf"oom_memcg=\S*/job_{job_id}\b.*?,pid=(\d+)", log))
    lines = re.findall(r"^(?:\[[\s\d.]+\]\s*)?(.*Killed process (\d+) .*)$", log, re.M)
    return tuple(line for line, pid in lines if pid in in_job and (pids is None or pid in pids))


def submit(case: Case, folder, images, timeout: float = 180) -> JobRun:
    """Submit `case` (batch.submit: it waits, and cancels a job that outlives `timeout`) and
    gather what its user can read afterwards."""
    folder = Path(folder)
    script, args = job_script(case, Path(images))
    name = f"loader-oom-{case.name.replace(' ', '-')}"
    options = [f"--mem={case.mem}", f"--chdir={folder}"]
    job = batch.submit(script, args, name=name, logs=folder, timeout=timeout, options=options)
    if job.job_id is None:
        raise RuntimeError(f"sbatch refused {case.command()}: {job.output}")
    return JobRun(
        case.name,
        case.command(),
        job.returncode if job.state not in ("PENDING", "CANCELLED") else None,
        slurm_state(job),
        job.output,
        kernel_lines(job.job_id, pids=set(job_memory.announced_pids(job.output))),
    )


def run_on_cluster(folder, cases=CASES) -> dict[str, JobRun]:
    """Submit every case side by side (the images written once, beforehand)."""
    folder = Path(folder)
    images = job_memory.write_images(folder / "images.npy", IMAGES_MIB)
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        futures = {c.name: pool.submit(submit, c, folder, images) for c in cases}
    return {name: future.result() for name, future in futures.items()}


def run_in_job(folder, cases=CASES, timeout: float = 120) -> dict[str, JobRun]:
    """Run the srun cases as steps of the job this process runs in (a kernel a centre's hub
    started inside a job), each step with its own --mem, two at a time."""
    folder = Path(folder)
    images = job_memory.write_images(folder / "images.npy", IMAGES_MIB)

    def step(case: Case) -> JobRun:
        srun = ["srun", "--overlap", "--ntasks=1", "--cpus-per-task=1", f"--mem={case.mem}"]
        program = ["-m", PROGRAM, *case.program]
        done = processes.run(
            [*srun, sys.executable, *program, "--data", str(images)], timeout=timeout, merge=True
        )
        shown = shlex.join(["srun", f"--mem={case.mem}", "python", *program])
        return JobRun(case.name, shown, done.returncode, "", done.stdout)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {c.name: pool.submit(step, c) for c in cases if c.srun}
    return {name: future.result() for name, future in futures.items()}


# --- The recorded run ---------------------------------------------------------------------------


def cluster_label(node_output: str = "") -> dict:
    """Where and when: the cluster (Slurm's version, its memory settings), date, commit, PyTorch."""
    import torch

    version = processes.run(["sinfo", "--version"], timeout=30).stdout.strip()
    config = processes.run(["scontrol", "show", "config"], timeout=30).stdout
    settings = dict(re.findall(r"^(SelectTypeParameters|DefMemPerCPU)\s*=\s*(\S+)", config, re.M))
    node = re.search(r"slurmstepd-(\w+)", node_output)
    return {
        "machine": "the course's test cluster (.ci/slurm-cluster.sh: 2 nodes on one host, "
        "cgroup v1, ConstrainRAMSpace=yes)",
        "slurm": version,
        "settings": settings,
        "node": node[1] if node else None,
        "date": datetime.date.today().isoformat(),
        "commit": paths.commit(),
        "torch": torch.__version__,
    }


def record(destination: Path | None = None) -> Path:
    """Run every case on the cluster and write it, labelled, paths as a learner reads them:
    python -c "from course_utils.failing import cluster_oom; cluster_oom.record()" """
    with tempfile.TemporaryDirectory(prefix="loader-oom-", dir=Path.cwd()) as tmp:
        runs = run_on_cluster(tmp)
        shown = {
            name: {k: _shown(v, tmp) for k, v in asdict(run).items()} for name, run in runs.items()
        }
    result = {"label": cluster_label(runs["copies"].output), "runs": shown}
    return reference.save(result, (destination or paths.REFERENCE_DIR) / f"{RECORD}.json")


def _shown(value, tmp: str):
    if isinstance(value, str):
        return paths.as_learner_sees(value.replace(f"{tmp}/", "runs/09/"))
    if isinstance(value, (list, tuple)):
        return [_shown(v, tmp) for v in value]
    return value


@dataclass(frozen=True)
class ClusterRuns:
    runs: dict[str, JobRun]
    source: str  # one line: where these runs were made


def recorded(directory: Path | None = None) -> ClusterRuns:
    """The recorded run, with its label line."""
    data = reference.load(RECORD, directory)
    if data is None:
        raise FileNotFoundError(
            f"no recorded run course_utils/reference/{RECORD}.json: on a machine with the test "
            "cluster, run python -c "
            '"from course_utils.failing import cluster_oom; cluster_oom.record()"'
        )
    runs = {}
    for name, run in data["runs"].items():
        runs[name] = JobRun(**{**run, "kernel": tuple(run.get("kernel", ()))})
    label = data["label"]
    release = re.search(r"\d+(\.\d+)+", label["slurm"])  # "slurm-wlm 22.05.8" -> 22.05.8
    source = (
        f"recorded on {label['machine']}, node {label['node']}, "
        f"Slurm {release[0] if release else label['slurm']}, "
        f"{label['date']}, course commit {label['commit']}, PyTorch {label['torch']}"
    )
    return ClusterRuns(runs, source)


def in_a_job() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID")) and shutil.which("srun") is not None


STEP_REFUSED = re.compile(r"srun: error: .*(?:Unable to create step|step creation)", re.I)


def for_lesson(folder, step_timeout: float = 90) -> ClusterRuns:
    """Inside a Slurm job: the srun cases, run now as steps of this job. Elsewhere (no Slurm
    job here: a laptop, a grading sandbox, CI's notebook run), or where this job cannot start
    such steps (its memory is all given to the step the kernel runs in): the recorded run."""
    found = recorded()
    if not in_a_job():
        return ClusterRuns(found.runs, "no Slurm job here, so this is the run " + found.source)
    job = os.environ["SLURM_JOB_ID"]
    runs = run_in_job(folder, timeout=step_timeout)
    stuck = [r.case for r in runs.values() if r.exit_code is None or STEP_REFUSED.search(r.output)]
    if stuck:
        why = f"job {job} could not run {', '.join(stuck)} as a step of its own"
        return ClusterRuns(found.runs, f"{why}, so this is the run {found.source}")
    recorded_only = {n: r for n, r in found.runs.items() if n not in runs}  # never as a step
    source = f"run now, as steps of job {job}; {', '.join(recorded_only)}: the run {found.source}"
    return ClusterRuns({**runs, **recorded_only}, source)
