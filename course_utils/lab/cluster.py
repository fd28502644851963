"""Running lesson 10's steps: submitted to Slurm where a cluster answers, else on this machine
(a laptop, the grading sandbox), the same program with the same options (`batch`).

    launcher = batch.find_launcher()                   # Launcher("slurm", why) or ("local", why)
    jobs = cluster.scaling(launcher, data, records)    # 1, 2 and 4 ranks on one node, 2 nodes x 2
    cluster.sweep(launcher, data, records, [0.02, 0.1, 0.3], throttle=2)

On Slurm each shape is one job of slurm/lab_scaling.sh, its size given to sbatch on the command
line (which overrides the script's header); the sweep is one throttled array of
slurm/lab_sweep.sh (--array=0-N%K). Locally, `batch.local_run` starts one process per rank, as
srun does, with torchrun's variables, forked from a Python that has imported torch once; two
nodes are two groups of ranks on this machine, each naming its node (batch.NODE_VARIABLE) so that
each stages its own copy.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
from pathlib import Path

from course_utils import batch
from course_utils.batch import Job, Launcher, Shape
from course_utils.files import atomic_write_text
from course_utils.lab.scripts import PROGRAM, srun_program
from course_utils.paths import REPO_ROOT

SCRIPT_VARIABLE = "COURSE_LAB_SCRIPT"  # the digest of the batch script a run came from
STAGING_PROGRAM = "course_utils.jobs.lab_staging"
REFERENCE = "lab_cluster"  # the CI Slurm cluster's records (benchmarks.lab_cluster records them)
SCRIPTS = {name: REPO_ROOT / "slurm" / f"lab_{name}.sh" for name in ("scaling", "sweep", "staging")}
SHAPES = (Shape(1, 1), Shape(1, 2), Shape(1, 4), Shape(2, 2))


def digest(script: str) -> str:
    """A short digest of a batch script's text: records carry it, checks compare it."""
    return hashlib.sha256(script.encode()).hexdigest()[:16]


def local_run(name, module, args, shape, threads=1, timeout=300, script=None) -> Job:
    """`batch.local_run`, with the digest of the batch script the run stands for, if any."""
    environ = {SCRIPT_VARIABLE: digest(script)} if script is not None else {}
    return batch.local_run(name, module, args, shape, threads, timeout, environ)


def submit(name, script: Path, args, shape, logs, timeout=600, array=None, options=()) -> Job:
    """`batch.submit`, with the digest of the script in the job's environment."""
    environ = {SCRIPT_VARIABLE: digest(script.read_text())}
    return batch.submit(
        script,
        args,
        name=name,
        logs=logs,
        shape=shape,
        timeout=timeout,
        array=array,
        options=options,
        environ=environ,
    )


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


def _run_all(tasks, at_once: int, logs: Path) -> list[Job]:
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
) -> list[Job]:
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
) -> list[Job]:
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


def stage_and_measure(launcher: Launcher, data: Path, out: Path, logs: Path | None = None) -> Job:
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
) -> Job:
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
