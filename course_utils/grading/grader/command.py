"""`course grade`: the command that turns a folder of submissions into a gradebook.

It checks everything it was given before grading anything (the lesson, the submissions, the
limits, whether the sandbox runs here and hides what it must), then grades, here (pipeline.py)
or with `--slurm` across a job array (on_cluster.py), and writes the gradebook, feedback, JUnit
report and logs (gradebook.py) and, with `--lms`, the LMS's import file (lms.py). Every run has
a held-out seed (`--seed`, else a new one), written in the gradebook. Its options are wired in
course_utils/cli.py, with defaults read from `Limits` (runner/limits.py).
"""

from __future__ import annotations

import contextlib
import re
import signal
import sys
import time
from pathlib import Path

from course_utils.grading.grader.gradebook import ERROR
from course_utils.grading.grader.pipeline import grade_all
from course_utils.grading.grader.plan import Lesson
from course_utils.grading.grader.prepared import Prepared, finish, prepare_runs
from course_utils.grading.grader.results import choose_seed
from course_utils.grading.grader.submissions import find_submissions
from course_utils.grading.judge.beside import hidden_in_runs
from course_utils.grading.runner import sandbox
from course_utils.grading.runner.limits import Limits, default_limits, parse_size

# `course grade` options that set the sandbox's limits (Limits' fields of the same names).
SANDBOX_OPTIONS = ("max_procs", "max_memory", "max_file_size", "max_disk", "cpu_time")
SIZE_OPTIONS = ("max_memory", "max_file_size", "max_disk")


def limits_from_args(args) -> Limits:
    """`course grade`'s limits from its options (sizes such as 8G; 0: no limit); an option
    missing from `args` keeps its default."""
    option = {name: getattr(args, name, None) for name in SANDBOX_OPTIONS}
    sizes = {
        name: None if option[name] is None else parse_size(option[name], _flag(name))
        for name in SIZE_OPTIONS
    }
    if sizes["max_disk"] == 0:
        raise ValueError("--max-disk 0: the sandbox needs some writable space; give e.g. 2G")
    for name in ("max_procs", "cpu_time"):
        if option[name] is not None and option[name] < 0:
            raise ValueError(
                f"{_flag(name)} {option[name]}: give a positive number, or 0 for no limit"
            )
    return default_limits(
        args.timeout,
        args.jobs or 1,
        getattr(args, "cell_timeout", None),
        sandbox=not getattr(args, "no_sandbox", False),
        max_procs=option["max_procs"],
        cpu_time=option["cpu_time"],
        **sizes,
    )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_sandbox(limits: Limits, hidden: list[Path], probe: bool = True) -> None:
    """ValueError, with the fix, when the grading sandbox cannot run here or would show a
    folder in `hidden`; nothing to check with --no-sandbox. `probe=False` leaves out starting
    one (a login node that submits to a job array: each task probes its own node)."""
    if not limits.sandbox:
        return
    read_only, _ = sandbox.visible_paths()
    sandbox.check_hidden(read_only, hidden)
    why = sandbox.problem(limits.max_procs, masked=hidden_in_runs()) if probe else None
    if why:
        raise ValueError(f"cannot grade in a sandbox: {why}")


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def sigterm_as_interrupt():
    """scancel sends SIGTERM: clean up as for Ctrl-C (no kernel left behind), then restore."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _lesson_number(text: str | None) -> str | None:
    if text and not re.fullmatch(r"\d{1,2}", text):
        raise ValueError(f"--lesson {text!r}: give a lesson number, e.g. --lesson 01")
    return f"{int(text):02d}" if text else None


def _check_cluster_options(args) -> None:
    from course_utils.grading.grader.array import check_sbatch_options

    sbatch = list(getattr(args, "sbatch", None) or [])
    if not getattr(args, "slurm", False):
        if sbatch or getattr(args, "tasks", None) is not None:
            given = " ".join(sbatch) or f"--tasks {args.tasks}"
            raise ValueError(f"{given}: --tasks and sbatch options go with --slurm; add --slurm")
        return
    check_sbatch_options(sbatch)
    if args.tasks is not None and args.tasks < 1:
        raise ValueError(f"--tasks {args.tasks}: give at least 1 task")


def _prepare(args) -> Prepared:
    """Everything `course grade` needs before it grades; ValueError names what is wrong and
    the fix."""
    from course_utils.paths import repo_dir

    _check_cluster_options(args)
    lesson = _lesson_number(args.lesson)
    subs, skipped = find_submissions(Path(args.submissions), lesson)
    if not subs:
        raise ValueError(
            f"no submissions found in {args.submissions}"
            + (f" for lesson {lesson}" if lesson else "")
            + "; expected <learner>/NN_topic.ipynb or <learner>__NN_topic.ipynb"
        )
    lessons = {n: Lesson.load(n, repo_dir("solutions")) for n in sorted({s.lesson for s in subs})}
    if (args.jobs is not None and args.jobs < 1) or args.timeout <= 0:
        raise ValueError(f"-j {args.jobs} / --timeout {args.timeout:g}: both must be positive")
    limits = limits_from_args(args)
    hidden = [repo_dir("solutions"), Path(args.submissions), Path(args.out), Path.home()]
    check_sandbox(limits, hidden, probe=not getattr(args, "slurm", False))
    return Prepared(subs, skipped, lessons, limits, hidden)


def grade_main(args) -> int:
    """`course grade SUBMISSIONS [--lesson NN] [--out DIR] [-j N] [--timeout S] [--seed S]
    [--lms canvas|moodle] [--no-sandbox] [--max-procs N] [--max-memory SIZE]
    [--max-file-size SIZE] [--max-disk SIZE] [--cpu-time S] [--slurm [--tasks N] [--sbatch
    OPTIONS]]`."""
    try:
        ready = _prepare(args)
    except ValueError as e:
        print(f"course grade: {e}", file=sys.stderr)
        return 2
    for line in ready.skipped:
        print(line, file=sys.stderr)
    for line in prepare_runs(ready.lessons, ready.limits):
        print(line)
    if not ready.limits.sandbox:
        print(
            "course grade: --no-sandbox: learners' code runs with your rights (the gradebook's "
            "sandbox column says none)",
            file=sys.stderr,
        )
    if getattr(args, "slurm", False):
        from course_utils.grading.grader.on_cluster import grade_on_cluster

        return grade_on_cluster(args, ready)
    return _grade_here(args, ready)


def _grade_here(args, ready: Prepared) -> int:
    from course_utils.paths import SANITIZE_FILE

    out, jobs = Path(args.out), args.jobs or 1
    seed = choose_seed(getattr(args, "seed", None), None)
    start = time.perf_counter()
    with sigterm_as_interrupt():
        grades = grade_all(
            ready.subs,
            ready.lessons,
            ready.limits,
            jobs,
            SANITIZE_FILE,
            out / "logs",
            seed=seed,
        )
    finish(args, grades)
    print(
        f"graded {len(grades)} submissions in {time.perf_counter() - start:.1f} s (-j {jobs}); "
        f"held-out seed {seed} (--seed {seed} grades the same way again)"
    )
    print(f"sandbox: {ready.limits.describe()}")
    return 1 if any(g.status == ERROR for g in grades) else 0
