"""A learner's function run as a Slurm job they submit themselves: the function as a module file
beside a batch script, and the sbatch command line to run from the notebook's folder. At grade
time the judge reads Slurm's record of the job (grading/checks/slurm_record.py): whose it is,
how it ended, the script Slurm stored, the digest of the function on its command line, and the
result the program left in the job's comment (`witness.to_job_record`). Lessons 02 (02.2's
thread sweep) and 08 (08.3's profiled training) write their jobs this way.

    print(answer_jobs.write(answer_jobs.THREAD_SWEEP, thread_rates, "runs/02/job"))
    -> sbatch --parsable --export=ALL,COURSE_DIR=/home/ann/course runs/02/job/02.2-job.sh \\
           --answer /home/ann/course/notebooks/runs/02/job/thread_rates_yours.py --digest 3f2a...

The command exports COURSE_DIR: sbatch runs a copy of the script, which finds the course's
slurm/config.sh (account, modules, Python environment) through it. Torch-free.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from course_utils import notebook_code
from course_utils.files import atomic_write_text
from course_utils.paths import REPO_ROOT

BODY = (
    "set -euo pipefail",
    "# COURSE_DIR: the course's folder (the sbatch command line the lesson prints exports it)",
    'source "$COURSE_DIR/slurm/config.sh"',
    "course_activate",
)


@dataclass(frozen=True)
class AnswerJob:
    """One exercise's job: the learner's `function` run by the course's `program` (a module of
    course_utils.jobs, taking --answer FILE and --digest D) under `header`'s #SBATCH lines."""

    exercise: str  # "02.2"
    function: str  # the learner's function the program loads from --answer
    program: str  # python -m PROGRAM on the job's one task
    header: str  # "#!/bin/bash" and the #SBATCH lines

    @property
    def script_name(self) -> str:
        return f"{self.exercise}-job.sh"

    def script(self) -> str:
        """The batch script as the lesson writes it, and as Slurm stores it."""
        run = f'srun -c "$SLURM_CPUS_PER_TASK" python -m {self.program} "$@"'
        return "\n".join([self.header.rstrip("\n"), *BODY, run, ""])


# Exercise 02.2's sweep: the learner's thread_rates on the lesson's training step, on the CPUs
# the job was given; sacct keeps the rates it measured (cpu_sweep.rates_text).
THREAD_SWEEP = AnswerJob(
    exercise="02.2",
    function="thread_rates",
    program="course_utils.jobs.thread_sweep",
    header="""#!/bin/bash
#SBATCH --job-name=thread-sweep
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --mem-per-cpu=1G
#SBATCH --time=00:05:00
""",
)
# Exercise 08.3's profiled training: the learner's name_the_bottleneck on the course's
# compute-bound and loader-bound jobs (course_utils.jobs.bottleneck_job), on one CPU; sacct keeps
# each job's loading share and the name the function gave it.
BOTTLENECK = AnswerJob(
    exercise="08.3",
    function="name_the_bottleneck",
    program="course_utils.jobs.bottleneck_job",
    header="""#!/bin/bash
#SBATCH --job-name=bottleneck
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=2G
#SBATCH --time=00:05:00
""",
)


def answer_digest(fn) -> str:
    """The digest of the function's source: the job's command line carries it, and the judge
    holds it to the function in the learner's cell at grade time."""
    return notebook_code.digest(notebook_code.source(fn))


def digest_if_readable(fn) -> str | None:
    """`answer_digest(fn)`, or None where Python cannot read its source (the judge's probes ask
    for the learner's function as their cell defines it now)."""
    try:
        return answer_digest(fn)
    except ValueError:
        return None


def program_arguments(job: AnswerJob, description: str, argv=None):
    """A job program's command line, as `write` gives it (--answer FILE --digest D): the
    learner's function loaded from FILE, and D."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--answer", required=True, help=f"the learner's {job.function}, a module")
    parser.add_argument("--digest", required=True, help="the digest of its source")
    args = parser.parse_args(argv)
    return load(args.answer, job.function), args.digest


def submit_line(script: str | os.PathLike, args: Sequence[str]) -> str:
    """The sbatch command that submits `script` with `args`, from the notebook's folder."""
    command = ["sbatch", "--parsable", f"--export=ALL,COURSE_DIR={REPO_ROOT}", str(script)]
    return shlex.join([*command, *map(str, args)])


def write(job: AnswerJob, fn, folder: str | os.PathLike) -> str:
    """Write `job`'s script and the learner's `fn` as a module into `folder`; return the sbatch
    command to run (nothing is submitted). NotImplementedError while `fn` is the stub."""
    if notebook_code.is_stub(fn):
        raise NotImplementedError(f"write {job.function} ({job.exercise}) first: the job runs it")
    folder = Path(folder)
    module = notebook_code.function_module(fn, job.function, folder)
    script = atomic_write_text(folder / job.script_name, job.script())
    return submit_line(script, ["--answer", module.resolve(), "--digest", answer_digest(fn)])


def load(path: str | os.PathLike, name: str):
    """`name` from the module file `path` (a function a lesson wrote with `write`)."""
    spec = importlib.util.spec_from_file_location("answer", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"--answer {path}: not a Python module file (answer_jobs.write makes one)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = getattr(module, name, None)
    if not callable(found):
        raise ValueError(f"--answer {path} defines no function {name}: write it with answer_jobs")
    return found
