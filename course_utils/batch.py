"""Batch jobs from a notebook: submitted to Slurm where a controller answers, else the same
program on this machine, one process per rank (lessons 00, 05, 09 and 10 run the learner's jobs).

    launcher = batch.find_launcher()        # Launcher("slurm", why) or Launcher("local", why)
    job = batch.submit(script, args, name="mine", logs=folder, shape=Shape(2, 2))
    job = batch.local_run("mine", "course_utils.jobs.ddp_train", args, Shape(2, 2))
    job = batch.run_script(script, "mine", logs=folder)   # one task: sbatch, or bash here

`submit` runs `sbatch --parsable` and waits on the scheduler's own answers: a job still waiting
in the queue is reported as waiting (with Slurm's reason), not as ended; when the wait ends (its
time limit, or the kernel interrupted), the job is cancelled with `scancel`, and the output says
so. The finished job's record comes from `sacct` (`accounting.ended_job_steps`: once slurmdbd
has written its end), the record a learner's code cannot write. `local_run` starts the ranks
through `launching.run_programs` with torchrun's variables; a shape of several nodes is emulated,
each rank naming its node (NODE_VARIABLE).
Which of the two a lesson takes is a plain function of what the machine answered
(`choose_launcher`); LAUNCHER_VARIABLE decides instead when set.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import accounting, launching, processes
from course_utils.files import atomic_write_text
from course_utils.paths import REPO_ROOT
from course_utils.ranks import NODE_VARIABLE, local_launch_environ

LAUNCHER_VARIABLE = "COURSE_LAUNCHER"  # "slurm" or "local": chosen, not probed
JOB_VARIABLE = "COURSE_JOB"  # a local run's stand-in for SLURM_JOB_ID: a new run, a new id
POLL = 2.0  # seconds between two looks at the queue (the test cluster schedules every 2 s)
WAITING = ("PENDING", "CONFIGURING", "REQUEUED", "RESV_DEL_HOLD", "REQUEUE_HOLD", "SUSPENDED")


@dataclass(frozen=True)
class Launcher:
    kind: str  # "slurm" or "local"
    why: str

    def __str__(self) -> str:
        return f"{self.kind} ({self.why})"


def choose_launcher(
    override: str | None, sbatch: str | None, sinfo_ok: bool, sinfo_says: str = ""
) -> Launcher:
    """Slurm when sbatch is installed and the controller answered sinfo, else local ranks;
    `override` (LAUNCHER_VARIABLE) decides when set."""
    if override:
        if override not in ("slurm", "local"):
            raise ValueError(
                f"{LAUNCHER_VARIABLE}={override!r} must be 'slurm' or 'local' (or unset, to ask "
                "the machine)"
            )
        return Launcher(override, f"{LAUNCHER_VARIABLE}={override}")
    if not sbatch:
        return Launcher("local", "no Slurm here: sbatch is not installed")
    if not sinfo_ok:
        said = f": {sinfo_says.strip().splitlines()[0]}" if sinfo_says.strip() else ""
        return Launcher("local", f"no Slurm here: sinfo got no answer from a controller{said}")
    return Launcher("slurm", f"sbatch at {sbatch}, and the controller answered")


def find_launcher(environ=None) -> Launcher:
    """Ask this machine: is there a Slurm controller to submit to?"""
    environ = os.environ if environ is None else environ
    override, sbatch = environ.get(LAUNCHER_VARIABLE), shutil.which("sbatch")
    ok, says = False, ""
    if sbatch and not override:
        try:
            done = processes.run(["sinfo", "-h", "-o", "%t"], timeout=20)
            ok, says = done.ok and bool(done.stdout.split()), done.stderr or done.describe()
        except OSError as e:  # sinfo missing beside sbatch
            says = str(e)
    return choose_launcher(override, sbatch, ok, says)


SITE_CONFIG = REPO_ROOT / "slurm" / "config.sh"  # the course's site settings: one file to edit


def site_partition(environ=None, config: Path = SITE_CONFIG) -> str:
    """The partition the course's jobs go to: COURSE_PARTITION from the environment, else the
    default slurm/config.sh gives it (`COURSE_PARTITION=${COURSE_PARTITION:-gpu}`); "" where
    neither names one (the cluster's default partition, often CPU-only)."""
    environ = os.environ if environ is None else environ
    if environ.get("COURSE_PARTITION"):
        return environ["COURSE_PARTITION"]
    text = config.read_text() if config.is_file() else ""
    m = re.search(r"^COURSE_PARTITION=\$\{COURSE_PARTITION:-([^}]*)\}", text, re.MULTILINE)
    return m[1].strip().strip("'\"") if m else ""


@dataclass(frozen=True)
class Shape:
    nodes: int
    per_node: int

    @property
    def ranks(self) -> int:
        return self.nodes * self.per_node

    @property
    def name(self) -> str:
        return f"{self.nodes}x{self.per_node}"

    def sbatch_options(self) -> list[str]:
        """The job's size for sbatch's command line, which overrides the script's header."""
        return [
            f"--nodes={self.nodes}",
            f"--ntasks={self.ranks}",
            f"--ntasks-per-node={self.per_node}",
        ]


@dataclass(frozen=True)
class Job:
    """One job or local launch: its name, how it ended, what it printed, and for a Slurm job its
    id, the scheduler's final state and sacct's record (`steps`)."""

    name: str
    launcher: str
    returncode: int | None
    output: str
    seconds: float
    job_id: str | None = None
    state: str | None = None
    steps: tuple[accounting.Step, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def tail(self, lines: int = 12) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


# ---- on this machine ------------------------------------------------------------------------

_LOCAL_JOBS = itertools.count(1)


def rank_environ(base: Mapping[str, str], shape: Shape, rank: int, port: int) -> dict:
    """What a local rank finds in its environment: `base`, torchrun's variables for its place in
    `shape` (rank 0 listens on `port`), and, on an emulated node of several, the node's name."""
    node, local = divmod(rank, shape.per_node)
    place = {
        "RANK": str(rank),
        "LOCAL_RANK": str(local),
        "WORLD_SIZE": str(shape.ranks),
        "LOCAL_WORLD_SIZE": str(shape.per_node),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }
    if shape.nodes > 1:
        place[NODE_VARIABLE] = f"node{node}"
    return {**base, **place}


def local_run(
    name: str,
    module: str,
    args: Sequence,
    shape: Shape,
    threads: int = 1,
    timeout: float = 300,
    environ: Mapping[str, str] | None = None,
) -> Job:
    """Run `python -m module args` here at `shape`, one forked process per rank
    (`launching.run_programs`), `threads` torch threads each, `environ` added to each."""
    local = local_launch_environ()  # a kernel inside a Slurm job: its variables set aside
    base = {
        **local.environ,
        "OMP_NUM_THREADS": str(threads),
        JOB_VARIABLE: f"local-{os.getpid()}-{next(_LOCAL_JOBS)}",
        LAUNCHER_VARIABLE: "local",
        **(environ or {}),
    }
    port, args = launching.free_port(), tuple(str(a) for a in args)
    tasks = [
        launching.Task(module, args, rank_environ(base, shape, rank, port))
        for rank in range(shape.ranks)
    ]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="course-job-") as folder:
        log = Path(folder) / f"{name}.log"
        atomic_write_text(log, f"{local.note}\n" if local.note else "")
        code = launching.run_programs(tasks, log, timeout, preload=(module,))
        output = log.read_text()
    return Job(name, "local", code, output, time.monotonic() - start)


def run_here(
    script: Path, name: str, timeout: float = 600, environ: Mapping[str, str] | None = None
) -> Job:
    """A batch script's commands run here by bash, as one task of a job would run them (its
    #SBATCH lines are comments to bash): the local route of a one-task job."""
    local = local_launch_environ()
    env = {
        **local.environ,
        JOB_VARIABLE: f"local-{os.getpid()}-{next(_LOCAL_JOBS)}",
        LAUNCHER_VARIABLE: "local",
        **(environ or {}),
    }
    done = processes.run(["bash", str(script)], timeout=timeout, env=env, merge=True)
    note = f"{local.note}\n" if local.note else ""
    if done.timed_out:
        note += f"the script ran past {timeout:g} s and was ended\n"
    code = 1 if done.timed_out else done.returncode
    return Job(name, "local", code, note + done.stdout, done.seconds)


def run_script(
    script: Path,
    name: str,
    logs: Path,
    launcher: Launcher | None = None,
    timeout: float = 600,
) -> Job:
    """`script` as a job: submitted where Slurm answers (`submit`), else its commands run here
    (`run_here`); `launcher` decides instead of asking the machine."""
    launcher = launcher or find_launcher()
    if launcher.kind == "slurm":
        return submit(script, name=name, logs=logs, timeout=timeout)
    return run_here(script, name, timeout)


# ---- on Slurm -------------------------------------------------------------------------------


def sbatch_command(
    script: Path, args: Sequence, name: str, output: Path, shape: Shape | None, array, options
) -> list[str]:
    size = shape.sbatch_options() if shape else []
    arrays = [f"--array={array}"] if array else []
    head = ["sbatch", "--parsable", f"--job-name={name}", f"--output={output}"]
    return [*head, *size, *arrays, *options, str(script), *map(str, args)]


def submit(
    script: Path,
    args: Sequence = (),
    *,
    name: str,
    logs: Path,
    shape: Shape | None = None,
    timeout: float = 600,
    array: str | None = None,
    options: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Job:
    """Submit `script` (at `shape`; as an `array` such as "0-2%2"; with more sbatch `options`),
    wait for it at most `timeout` seconds, and return how it ended with its log(s) and sacct's
    record. The job runs in the current folder; its log goes to <logs>/<name>-<id>.out (an
    array's to <name>-<id>_<task>.out)."""
    logs.mkdir(parents=True, exist_ok=True)
    output = logs / (f"{name}-%A_%a.out" if array else f"{name}-%j.out")
    env = {
        **os.environ,
        "COURSE_DIR": os.environ.get("COURSE_DIR") or str(REPO_ROOT),  # for `source .../config.sh`
        LAUNCHER_VARIABLE: "slurm",
        **(environ or {}),
    }
    start = time.monotonic()
    cmd = sbatch_command(script, args, name, output, shape, array, options)
    done = processes.run(cmd, timeout=60, env=env)
    job_id = done.stdout.strip().split(";")[0] if done.ok else ""
    if not job_id.isdigit():
        said = (done.stderr or done.stdout).strip() or done.describe()
        return Job(name, "slurm", 1, f"sbatch refused the job: {said}\n", done.seconds)
    state, note = wait(job_id, timeout)
    # slurmdbd writes a job's end a moment after the job left the queue: read its record whole
    steps = tuple(accounting.ended_job_steps(job_id))
    state = state or _final_state(job_id, steps)
    files = sorted(logs.glob(f"{name}-{job_id}[._]*out"))
    text = "".join(p.read_text(errors="replace") for p in files) + (f"{note}\n" if note else "")
    code, seconds = _returncode(state, steps), time.monotonic() - start
    return Job(name, "slurm", code, text, seconds, job_id, state, steps)


def job_states(job_id: str) -> dict[str, tuple[str, str]]:
    """{job or array task id: (state, Slurm's reason)} while the queue lists it; {} after."""
    done = processes.run(["squeue", "-h", "-j", job_id, "-o", "%i|%T|%r"], timeout=30)
    states = {}
    for line in done.stdout.splitlines() if done.ok else []:
        parts = line.strip().split("|")
        if len(parts) == 3:
            states[parts[0]] = (parts[1], parts[2])
    return states


def wait(job_id: str, timeout: float, poll: float | None = None) -> tuple[str, str]:
    """("", "") once the job left the queue (its final state is the scheduler's record's to
    say); past `timeout`, or interrupted, the job is cancelled and the note says so (a job still
    waiting is said to be waiting: "PENDING", else "CANCELLED")."""
    poll = POLL if poll is None else poll
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            states = job_states(job_id)
            if not states:
                return "", ""
            time.sleep(poll)
    except KeyboardInterrupt:
        _cancel(job_id)
        print(f"interrupted: cancelled job {job_id} (scancel)", flush=True)
        raise
    waiting = [s for s, _ in states.values() if s in WAITING]
    reason = next((r for s, r in states.values() if s in WAITING), "")
    _cancel(job_id)
    if waiting and len(waiting) == len(states):
        return "PENDING", (
            f"job {job_id} was still waiting in the queue after {timeout:g} s (reason: {reason}); "
            "cancelled it with scancel"
        )
    return "CANCELLED", f"job {job_id} ran past the wait's {timeout:g} s; cancelled it with scancel"


def _cancel(job_id: str) -> None:
    processes.run(["scancel", job_id], timeout=30)


def _final_state(job_id: str, steps: Sequence[accounting.Step]) -> str:
    """The scheduler's last word on a job that left the queue: sacct's state in `steps` (the
    worst of an array's tasks), else scontrol's, else UNKNOWN."""
    jobs = [s for s in steps if not s.is_step]
    if jobs:
        bad = [s.state for s in jobs if s.state != "COMPLETED"]
        return bad[0] if bad else "COMPLETED"
    done = processes.run(["scontrol", "-o", "show", "job", job_id], timeout=30)
    for word in done.stdout.split() if done.ok else []:
        if word.startswith("JobState="):
            return word.split("=", 1)[1]
    return "UNKNOWN"


def _returncode(state: str, steps: Sequence[accounting.Step]) -> int:
    if state == "COMPLETED":
        return 0
    codes = [s.exit_code for s in steps if not s.is_step and s.exit_code]
    return codes[0] if codes else 1
