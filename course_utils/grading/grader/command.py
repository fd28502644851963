"""`course grade`: the command that turns a folder of submissions into a gradebook.

It checks everything it was given before grading anything (the lesson, the submissions, the
limits, whether the sandbox runs here and hides what it must), then grades (pipeline.py) and
writes the gradebook, feedback, JUnit report and logs (gradebook.py). Its options are wired in
course_utils/cli.py, with defaults read from `Limits` (runner/limits.py).
"""

from __future__ import annotations

import contextlib
import re
import signal
import sys
import time
from pathlib import Path

from course_utils.grading.grader.gradebook import ERROR, summary_table, write_outputs
from course_utils.grading.grader.pipeline import grade_all
from course_utils.grading.grader.plan import Lesson
from course_utils.grading.grader.submissions import find_submissions
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
        args.jobs,
        getattr(args, "cell_timeout", None),
        sandbox=not getattr(args, "no_sandbox", False),
        max_procs=option["max_procs"],
        cpu_time=option["cpu_time"],
        **sizes,
    )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_sandbox(limits: Limits, hidden: list[Path]) -> None:
    """ValueError, with the fix, when the grading sandbox cannot run here or would show a
    folder in `hidden`; nothing to check with --no-sandbox."""
    if not limits.sandbox:
        return
    read_only, _ = sandbox.visible_paths()
    sandbox.check_hidden(read_only, hidden)
    why = sandbox.problem(limits.max_procs)
    if why:
        raise ValueError(f"cannot grade in a sandbox: {why}")


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def _sigterm_as_interrupt():
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


def _prepare(args):
    """Everything `course grade` needs before it grades: (submissions, passed-over warnings,
    lessons, limits); ValueError names what is wrong and the fix."""
    from course_utils.paths import repo_dir

    lesson = _lesson_number(args.lesson)
    subs, skipped = find_submissions(Path(args.submissions), lesson)
    if not subs:
        raise ValueError(
            f"no submissions found in {args.submissions}"
            + (f" for lesson {lesson}" if lesson else "")
            + "; expected <learner>/NN_topic.ipynb or <learner>__NN_topic.ipynb"
        )
    lessons = {n: Lesson.load(n, repo_dir("solutions")) for n in sorted({s.lesson for s in subs})}
    if args.jobs < 1 or args.timeout <= 0:
        raise ValueError(f"-j {args.jobs} / --timeout {args.timeout}: both must be positive")
    limits = limits_from_args(args)
    hidden = [repo_dir("solutions"), Path(args.submissions), Path(args.out), Path.home()]
    check_sandbox(limits, hidden)
    return subs, skipped, lessons, limits


def grade_main(args) -> int:
    """`course grade SUBMISSIONS [--lesson NN] [--out DIR] [-j N] [--timeout S] [--no-sandbox]
    [--max-procs N] [--max-memory SIZE] [--max-file-size SIZE] [--max-disk SIZE]
    [--cpu-time S]`."""
    from course_utils.paths import SANITIZE_FILE

    try:
        subs, skipped, lessons, limits = _prepare(args)
    except ValueError as e:
        print(f"course grade: {e}", file=sys.stderr)
        return 2
    for line in skipped:
        print(line, file=sys.stderr)
    if not limits.sandbox:
        print(
            "course grade: --no-sandbox: learners' code runs with your rights (the gradebook's "
            "sandbox column says none)",
            file=sys.stderr,
        )
    out = Path(args.out)
    start = time.perf_counter()
    with _sigterm_as_interrupt():
        grades = grade_all(subs, lessons, limits, args.jobs, SANITIZE_FILE, out / "logs")
        paths = write_outputs(out, grades)
    print(summary_table(grades))
    print(
        f"graded {len(grades)} submissions in {time.perf_counter() - start:.1f} s "
        f"(-j {args.jobs}); gradebook {paths['gradebook']}, feedback in {paths['feedback']}/, "
        f"JUnit report {paths['junit']}, logs in {out / 'logs'}/"
    )
    print(f"sandbox: {limits.describe()}")
    return 1 if any(g.status == ERROR for g in grades) else 0
