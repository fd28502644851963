"""Running lesson 10's steps: submitted to Slurm where a cluster answers, else on this machine
(a laptop, the grading sandbox), the same program with the same options.

    launcher = lab.find_launcher()                  # Launcher("slurm", why) or ("local", why)
    runs = lab.scaling(launcher, data, records)     # 1, 2 and 4 ranks on one node, 2 nodes x 2
    lab.sweep(launcher, data, records, [0.02, 0.1, 0.3], throttle=2)

On Slurm each shape is one job of slurm/lab_scaling.sh, its size given to sbatch on the command
line (which overrides the script's header); the sweep is one throttled array of
slurm/lab_sweep.sh (--array=0-N%K). Locally, `local_run` starts one process per rank, as srun
does, with torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), forked from a Python that has imported torch once (`launching.run_programs`);
two nodes are two groups of ranks on this machine, each naming its node (staging.NODE_VARIABLE)
so that each stages its own copy.
The decision is a plain function of what the machine answered (`choose_launcher`).
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import itertools
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from course_utils import launching, processes
from course_utils.files import atomic_write_text
from course_utils.lab.scripts import PROGRAM, srun_program
from course_utils.lab.staging import JOB_VARIABLE, NODE_VARIABLE
from course_utils.paths import REPO_ROOT
from course_utils.ranks import local_launch_environ

LAUNCHER_VARIABLE = "COURSE_LAB_LAUNCHER"  # "slurm" or "local": chosen, not probed
SCRIPT_VARIABLE = "COURSE_LAB_SCRIPT"  # the digest of the batch script a run came from
STAGING_PROGRAM = "course_utils.jobs.lab_staging"
REFERENCE = "lab_cluster"  # the CI Slurm cluster's records (benchmarks.lab_cluster records them)
SCRIPTS = {name: REPO_ROOT / "slurm" / f"lab_{name}.sh" for name in ("scaling", "sweep", "staging")}


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
    `override` (COURSE_LAB_LAUNCHER) decides when set."""
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


def digest(script: str) -> str:
    """A short digest of a batch script's text: records carry it, checks compare it."""
    return hashlib.sha256(script.encode()).hexdigest()[:16]


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


SHAPES = (Shape(1, 1), Shape(1, 2), Shape(1, 4), Shape(2, 2))


@dataclass(frozen=True)
class Run:
    """One job or local launch: its name, how it ended and what it printed."""

    name: str
    launcher: str
    returncode: int | None
    output: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def tail(self, lines: int = 12) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


_LOCAL_JOBS = itertools.count(1)


def rank_environ(base: dict, shape: Shape, rank: int, port: int) -> dict:
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
        place[NODE_VARIABLE] = f"node{node}"  # each emulated node stages its own copy
    return {**base, **place}


def local_run(
    name: str,
    module: str,
    args: list,
    shape: Shape,
    threads: int = 1,
    timeout: float = 300,
    script: str | None = None,
) -> Run:
    """Run `python -m module args` locally at `shape`, one process per rank
    (`launching.run_programs`), with `threads` torch threads per rank."""
    local = local_launch_environ()  # a kernel inside a Slurm job: its variables set aside
    base = {
        **local.environ,
        "OMP_NUM_THREADS": str(threads),
        JOB_VARIABLE: f"local-{os.getpid()}-{next(_LOCAL_JOBS)}",  # a new job: a new copy
        LAUNCHER_VARIABLE: "local",
    }
    if script is not None:
        base[SCRIPT_VARIABLE] = digest(script)
    port, args = launching.free_port(), tuple(str(a) for a in args)
    tasks = [
        launching.Task(module, args, rank_environ(base, shape, rank, port))
        for rank in range(shape.ranks)
    ]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="course-lab-") as folder:
        log = Path(folder) / f"{name}.log"
        atomic_write_text(log, f"{local.note}\n" if local.note else "")
        code = launching.run_programs(tasks, log, timeout, preload=(module,))
        output = log.read_text()
    return Run(name, "local", code, output, time.monotonic() - start)


def submit(
    name: str,
    script: Path,
    args: list,
    shape: Shape | None,
    logs: Path,
    timeout: float = 600,
    array: str | None = None,
    options=(),
) -> Run:
    """`sbatch --wait` the script (at `shape`, when given; as an `array` such as "0-2%2"; with
    more sbatch `options`) and return its exit code (an array's: the worst task's) and log(s).
    The job runs in the current folder; its log goes to <logs>/<name>-<job id>.out (an array's
    to <name>-<id>_<task>.out)."""
    logs.mkdir(parents=True, exist_ok=True)
    output = logs / (f"{name}-%A_%a.out" if array else f"{name}-%j.out")
    sbatch_options = [*([f"--array={array}"] if array else []), *options]
    size = shape.sbatch_options() if shape else []
    cmd = [
        "sbatch",
        "--wait",
        f"--output={output}",
        *size,
        *sbatch_options,
        str(script),
        *map(str, args),
    ]
    env = {
        **os.environ,
        "COURSE_DIR": os.environ.get("COURSE_DIR") or str(REPO_ROOT),  # for `source .../config.sh`
        LAUNCHER_VARIABLE: "slurm",
        SCRIPT_VARIABLE: digest(script.read_text()),
    }
    done = processes.run(cmd, timeout=timeout, env=env)
    job = done.stdout.split()[-1] if done.stdout.strip() else ""
    files = sorted(logs.glob(f"{name}-{job}[._]*out")) if job.isdigit() else []
    text = "".join(p.read_text() for p in files) or done.stdout + done.stderr
    return Run(name, "slurm", done.returncode, text, done.seconds)


# ---- the lab's steps ---------------------------------------------------------------------


def _program_args(data: Path, records: Path, study: str, extra=()) -> list[str]:
    return [
        "--data",
        str(Path(data).resolve()),
        "--out",
        str(Path(records).resolve()),
        "--study",
        study,
        *map(str, extra),
    ]


def _run_all(tasks, at_once: int, logs: Path) -> list[Run]:
    """Run the tasks, `at_once` at a time; each run's output is kept as <logs>/<name>.log."""
    with concurrent.futures.ThreadPoolExecutor(max(1, at_once)) as pool:
        runs = list(pool.map(lambda task: task(), tasks))
    for run in runs:
        atomic_write_text(Path(logs) / f"{run.name}.log", run.output)
    return runs


def scaling(
    launcher: Launcher,
    data: Path,
    records: Path,
    shapes=SHAPES,
    steps: int = 8,
    threads: int = 1,
    logs: Path | None = None,
    together: bool = False,
    cpus_per_task: int | None = None,
) -> list[Run]:
    """The same training at each shape, one run after the other, so that no run measures
    another sharing its node: one job each on Slurm (all submitted at once with `together`;
    `cpus_per_task` overrides the script's), one launch each here, `threads` per rank."""
    extra = ["--steps", steps]
    logs = logs or Path(records) / "logs"
    options = (f"--cpus-per-task={cpus_per_task}",) if cpus_per_task else ()

    def task(shape: Shape):
        if launcher.kind == "slurm":
            args = _program_args(data, records, "scaling", extra)
            return functools.partial(
                submit, shape.name, SCRIPTS["scaling"], args, shape, logs, options=options
            )
        args = _program_args(data, records, "scaling", [*extra, "--threads", threads])
        return functools.partial(local_run, shape.name, PROGRAM, args, shape, threads)

    at_once = len(shapes) if launcher.kind == "slurm" and together else 1
    return _run_all([task(shape) for shape in shapes], at_once, logs)


def sweep(
    launcher: Launcher,
    data: Path,
    records: Path,
    lrs,
    throttle: int = 2,
    steps: int = 40,
    threads: int = 1,
    logs: Path | None = None,
    cpus_per_task: int | None = None,
) -> list[Run]:
    """One run per learning rate: on Slurm one array of len(lrs) tasks, at most `throttle` at a
    time (--array=0-N%K); here `throttle` launches at a time."""
    values = ",".join(f"{lr:g}" for lr in lrs)
    logs = logs or Path(records) / "logs"
    if launcher.kind == "slurm":
        args = _program_args(data, records, "sweep", ["--steps", steps, "--lrs", values])
        array = f"0-{len(lrs) - 1}%{throttle}"
        options = (f"--cpus-per-task={cpus_per_task}",) if cpus_per_task else ()
        job = functools.partial(
            submit, "sweep", SCRIPTS["sweep"], args, None, logs, array=array, options=options
        )
        return _run_all([job], 1, logs)
    one = Shape(1, 1)

    def task(index: int):
        options = ["--steps", steps, "--lrs", values, "--index", index, "--threads", threads]
        args = _program_args(data, records, "sweep", options)
        return functools.partial(local_run, f"sweep-{index}", PROGRAM, args, one, threads)

    return _run_all([task(i) for i in range(len(lrs))], throttle, logs)


def stage_and_measure(launcher: Launcher, data: Path, out: Path, logs: Path | None = None) -> Run:
    """The staging program: on Slurm at 2 nodes x 2 tasks (every rank stages, one copy per
    node), here as one rank (its readings then have the machine to themselves; the scaling runs
    stage on two emulated nodes). The first rank of each node times reading the data set from
    the shared folder and from its copy."""
    args = ["--data", str(Path(data).resolve()), "--out", str(Path(out).resolve())]
    logs = logs or Path(out) / "logs"
    if launcher.kind == "slurm":
        task = functools.partial(submit, "staging", SCRIPTS["staging"], args, Shape(2, 2), logs)
    else:
        task = functools.partial(local_run, "staging", STAGING_PROGRAM, args, Shape(1, 1))
    return _run_all([task], 1, logs)[0]


def run_script(
    script: str,
    shape: Shape,
    launcher: Launcher,
    data: Path,
    records: Path,
    folder: Path,
    threads: int = 1,
    timeout: float = 300,
) -> Run:
    """A batch script (a learner's) at `shape`: submitted on Slurm; here, the program its srun
    line starts, one local process per rank, with the script's digest in the run's record."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lab_scaling_yours.sh"
    atomic_write_text(path, script)
    args = _program_args(data, records, "check")
    if launcher.kind == "slurm":
        task = functools.partial(submit, shape.name, path, args, shape, folder / "logs", timeout)
    else:
        module, program_args = srun_program(script, args, threads)
        task = functools.partial(
            local_run, shape.name, module, program_args, shape, threads, timeout, script
        )
    return _run_all([task], 1, folder / "logs")[0]
