"""Running lesson 10's steps: on this machine (a laptop, the grading sandbox: the notebook's route
where no Slurm answers, and the checks' own runs), or submitted to Slurm and waited for, the same
program with the same options (`batch`). The Slurm route records the CI cluster's reference
(benchmarks/lab_cluster.py); a learner on a cluster submits their own jobs instead
(`lab.your_jobs` writes them), which nothing here waits for or cancels.

    launcher = batch.find_launcher()                     # Launcher("slurm", why) or ("local", why)
    cluster.stage_and_measure(launcher, data, out, stage_dataset)   # your staging function
    cluster.study(launcher, scaling_script, data, records, [0.02, 0.1, 0.3])   # your script

The study runs the learner's batch script: on Slurm each shape is one job of it, its size and
its GPUs (a GPU per task: `--gpus-per-node=N` for N tasks per node) given to sbatch on the
command line, which overrides the script's header, or, for a CPU run, its CPU variant, which asks
for no GPU at all; the sweep is one throttled array of the same script (--array=0-N%K). Locally,
`batch.local_run` starts the program of the script's srun line, one process per rank, as srun
does, with torchrun's variables, forked from a Python that has imported torch once; two nodes
are two groups of ranks on this machine, each naming its node (ranks.NODE_VARIABLE). Every
record a run writes carries the digest of the script it came from (SCRIPT_VARIABLE), and on
Slurm each job's name carries it too, so the scheduler's own record (`sacct`) names it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
from pathlib import Path

from course_utils import batch, notebook_code
from course_utils.batch import Job, Launcher, Shape
from course_utils.device import ENV as DEVICE_VARIABLE
from course_utils.files import atomic_write_text
from course_utils.lab import scripts
from course_utils.lab.scripts import srun_program
from course_utils.paths import REPO_ROOT

SCRIPT_VARIABLE = "COURSE_LAB_SCRIPT"  # the digest of the batch script a run came from
STAGING_PROGRAM = "course_utils.jobs.lab_staging"
REFERENCE = "lab_cluster"  # the CI Slurm cluster's records (benchmarks.lab_cluster records them)
SCRIPTS = {name: REPO_ROOT / "slurm" / f"lab_{name}.sh" for name in ("scaling", "sweep", "staging")}
SHAPES = (Shape(1, 1), Shape(1, 2), Shape(1, 4), Shape(2, 2))
STEPS, SWEEP_STEPS = 8, 40  # timed steps of a scaling run and of a sweep task
LRS = (0.02, 0.1, 0.3)  # the sweep's learning rates
THROTTLE = 2  # sweep tasks at a time (--array=0-N%THROTTLE)
# the digest of a batch script's text: records carry it, checks compare it
digest = notebook_code.digest


def job_name(name: str, script: str) -> str:
    """The Slurm job name of a run of `script`: its shape (or "sweep") and the script's digest,
    so that sacct's record of the job names the script it ran."""
    return f"lab-{name}-{digest(script)[:8]}"


def cpu_run(environ=None) -> bool:
    """A CPU run (COURSE_DEVICE=cpu): its jobs ask for no GPU."""
    environ = os.environ if environ is None else environ
    return environ.get(DEVICE_VARIABLE) == "cpu"


def device_options(text: str, shape: Shape, environ=None) -> tuple[str, ...]:
    """sbatch options for a job of `text` at `shape`: on GPUs, the script's per-node GPU request
    sized for the shape's tasks per node (a GPU per task: `--gpus-per-node=2` for 2 tasks per
    node); none for a CPU run, which submits the script's CPU variant instead."""
    return () if cpu_run(environ) else scripts.gpu_options(text, shape.per_node)


def run_environ(script: str, environ=None) -> dict[str, str]:
    """What a run of `script` adds to its ranks' environment: the script's digest (its records
    carry it), and NCCL_DEBUG=INFO (INIT and NET lines), so that NCCL names its transport in the
    run's log whatever the script sets."""
    environ = os.environ if environ is None else environ
    return {
        SCRIPT_VARIABLE: digest(script),
        "NCCL_DEBUG": environ.get("NCCL_DEBUG", "INFO"),
        "NCCL_DEBUG_SUBSYS": environ.get("NCCL_DEBUG_SUBSYS", "INIT,NET"),
    }


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


def _submit(name, script: Path, args, shape, logs, timeout=600, array=None, options=()) -> Job:
    """`batch.submit` of `script`, named for its digest, with the digest in the job's
    environment (the records carry it), its GPUs sized for `shape`; a CPU run submits the
    script's CPU variant (`scripts.cpu_variant`, written beside the logs). The Job is named
    `name` (its log <logs>/<name>.log)."""
    text = script.read_text()
    submitted, said = script, ""
    if cpu_run():
        submitted = atomic_write_text(
            Path(logs) / f"{script.stem}-cpu.sh", scripts.cpu_variant(text)
        )
        said = f"COURSE_DEVICE=cpu: submitted {submitted.name}, {script.name} without GPUs\n"
    job = batch.submit(
        submitted,
        args,
        name=job_name(name, text),
        logs=logs,
        shape=shape,
        timeout=timeout,
        array=array,
        options=(*device_options(text, shape), *options),
        environ=run_environ(text),
    )
    return dataclasses.replace(job, name=name, output=said + job.output)


def _local(name, script: str, args, shape, threads, timeout=300) -> Job:
    """The program of `script`'s srun line, here, one process per rank of `shape`."""
    try:
        module, program_args = srun_program(script, args, threads)
    except ValueError as e:
        return Job(name, "local", 2, f"the local launcher cannot run this script: {e}\n", 0.0)
    environ = run_environ(script)
    return batch.local_run(name, module, program_args, shape, threads, timeout, environ)


def scaling(
    launcher: Launcher,
    data: Path,
    records: Path,
    shapes=SHAPES,
    steps: int = STEPS,
    threads: int = 1,
    logs: Path | None = None,
    together: bool = False,
    cpus_per_task: int | None = None,
    script: Path | None = None,
) -> list[Job]:
    """The same training at each shape, one run after the other, so that no run measures
    another sharing its node: one job each of `script` (the course's slurm/lab_scaling.sh by
    default) on Slurm (all submitted at once with `together`; `cpus_per_task` overrides the
    script's), one launch each here of its srun line's program, `threads` per rank."""
    script = Path(script or SCRIPTS["scaling"])
    logs = logs or Path(records) / "logs"
    options = (f"--cpus-per-task={cpus_per_task}",) if cpus_per_task else ()

    def task(shape: Shape):
        if launcher.kind == "slurm":
            args = _program_args(data, records, "scaling", ["--steps", steps])
            return functools.partial(
                _submit, shape.name, script, args, shape, logs, options=options
            )
        args = _program_args(data, records, "scaling", ["--steps", steps, "--threads", threads])
        return functools.partial(_local, shape.name, script.read_text(), args, shape, threads)

    at_once = len(shapes) if launcher.kind == "slurm" and together else 1
    return _run_all([task(shape) for shape in shapes], at_once, logs)


def sweep(
    launcher: Launcher,
    data: Path,
    records: Path,
    lrs=LRS,
    throttle: int = THROTTLE,
    steps: int = SWEEP_STEPS,
    threads: int = 1,
    logs: Path | None = None,
    cpus_per_task: int | None = None,
    script: Path | None = None,
) -> list[Job]:
    """One run per learning rate of `script` (the course's slurm/lab_sweep.sh by default): on
    Slurm one array of len(lrs) tasks, at most `throttle` at a time (--array=0-N%K, on sbatch's
    command line); here `throttle` launches at a time."""
    script = Path(script or SCRIPTS["sweep"])
    values = ",".join(f"{lr:g}" for lr in lrs)
    logs = logs or Path(records) / "logs"
    if launcher.kind == "slurm":
        args = _program_args(data, records, "sweep", ["--steps", steps, "--lrs", values])
        array = f"0-{len(lrs) - 1}%{throttle}"
        options = (f"--cpus-per-task={cpus_per_task}",) if cpus_per_task else ()
        job = functools.partial(
            _submit, "sweep", script, args, Shape(1, 1), logs, array=array, options=options
        )
        return _run_all([job], 1, logs)
    one, text = Shape(1, 1), script.read_text()

    def task(index: int):
        options = ["--steps", steps, "--lrs", values, "--index", index, "--threads", threads]
        args = _program_args(data, records, "sweep", options)
        return functools.partial(_local, f"sweep-{index}", text, args, one, threads)

    return _run_all([task(i) for i in range(len(lrs))], throttle, logs)


@dataclasses.dataclass(frozen=True)
class Study:
    """The study a learner's script drove: its runs, or why none ran."""

    script: Path | None
    runs: tuple[Job, ...] = ()
    note: str = ""

    def summary(self) -> str:
        lines = [self.note] if self.note else []
        lines += [f"{r.name}: {'ok' if r.ok else 'FAILED'} in {r.seconds:.1f} s" for r in self.runs]
        failed = [r for r in self.runs if not r.ok]
        if failed:
            lines.append(
                f"{failed[0].name} ended with an error; its last lines:\n{failed[0].tail()}"
            )
        return "\n".join(lines)


def study(
    launcher: Launcher, scaling_script, data: Path, records: Path, lrs=LRS, folder=None
) -> Study:
    """The scaling study and the sweep, both driven by the learner's `scaling_script()`: its
    text is saved as <folder>/lab_scaling_yours.sh and run at every shape and as the sweep's
    array. A stub, or an answer that is not a script, runs nothing and says so."""
    try:
        text = scaling_script()
    except NotImplementedError:
        return Study(None, note="scaling_script is not written yet: nothing ran")
    if type(text) is not str or "srun" not in text:
        return Study(
            None, note=f"scaling_script returned {type(text).__name__}, not a batch script"
        )
    folder = Path(folder or Path(records).parent / "yours")
    path = atomic_write_text(folder / "lab_scaling_yours.sh", text)
    runs = scaling(launcher, data, records, script=path)
    runs += sweep(launcher, data, records, lrs, script=path)
    return Study(path, tuple(runs), f"your script {path.name} ({digest(text)}) {launcher}")


def stage_and_measure(
    launcher: Launcher, data: Path, out: Path, stage_dataset=None, logs: Path | None = None
) -> Job | None:
    """The staging program at 2 nodes x 2 ranks (on Slurm, or two emulated nodes here): every
    rank stages the data set with `stage_dataset` (the learner's function; None: the course's
    `staging.stage`), then the first rank of each node times reading it from the shared folder
    and from its copy. A stub runs nothing: None."""
    args = ["--data", str(Path(data).resolve()), "--out", str(Path(out).resolve())]
    logs = logs or Path(out) / "logs"
    if stage_dataset is not None:
        if notebook_code.is_stub(stage_dataset):
            return None
        folder = Path(out).parent / "yours"
        module = notebook_code.function_module(stage_dataset, "stage_dataset", folder)
        answer = digest(notebook_code.source(stage_dataset))
        args += ["--answer", str(module.resolve()), "--digest", answer]
    if launcher.kind == "slurm":
        task = functools.partial(_submit, "staging", SCRIPTS["staging"], args, Shape(2, 2), logs)
    else:
        task = functools.partial(batch.local_run, "staging", STAGING_PROGRAM, args, Shape(2, 2))
    return _run_all([task], 1, logs)[0]
