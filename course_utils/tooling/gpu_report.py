"""`make test-gpu`: run everything that needs a GPU, one step at a time, and print one table.

    python -m course_utils.tooling.gpu_report [--steps benchmarks,references,gpu-tests,lessons]
                                              [--lessons 05,02] [--budget SECONDS]

Steps, each in its own process with a time limit, so one failure (or a dead kernel) does not
stop the others: the benchmarks and the lesson references (written to course_utils/reference/,
labelled with device, PyTorch, date and commit: commit them), the tests marked `gpu`, and every
solution notebook under nbval-lax (their stored outputs come from a CPU, so GPU cells differ; each
cell must still run). The table at the end: step, passed or failed, seconds. Exit code 1 when a
step failed, 2 when there is no CUDA GPU. --budget caps the whole run, for a GPU job or a lease
with a time limit: each step gets what is left of it, and the steps it leaves out are listed as
not run, so the table still comes out.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from course_utils import processes
from course_utils.paths import REFERENCE_DIR, REPO_ROOT
from course_utils.tables import text_table

STEPS = ("benchmarks", "references", "gpu-tests", "lessons")
LESSON_TIMEOUT = 900  # seconds for one notebook, kernel start included
MIN_STEP_SECONDS = 60  # under --budget, a step is not started with less than this left
NBVAL = [
    "-m",
    "pytest",
    "-p",
    "course_utils.grading.runner.kernel_watch",
    "-p",
    "no:cacheprovider",
    "--nbval-lax",
    "--nbval-current-env",
    "--nbval-cell-timeout=600",
    "-o",
    "addopts=-ra",
    "-q",
]


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]  # after the Python interpreter
    timeout: float


@dataclass(frozen=True)
class Outcome:
    name: str
    passed: bool
    seconds: float
    detail: str = ""


def plan(steps=STEPS, root: Path = REPO_ROOT, lessons: list[str] | None = None) -> list[Step]:
    """The commands of the chosen steps, in order; `lessons` (numbers such as "05") picks the
    notebooks and their order, all of them by default."""
    out = []
    if "benchmarks" in steps:
        argv = ["-m", "benchmarks", "--device", "cuda", "--out-dir", str(REFERENCE_DIR)]
        out.append(Step("benchmarks", argv, 1800))
    if "references" in steps:
        out.append(Step("lesson references", ["-m", "course_utils.jobs.reference_gpu"], 900))
    if "gpu-tests" in steps:
        tests = ["-m", "pytest", "-m", "gpu", "-o", "addopts=-ra", "-q", str(root / "tests")]
        out.append(Step("tests marked gpu", tests, 1800))
    if "lessons" in steps:
        notebooks = sorted((root / "solutions").glob("[0-9][0-9]_*.ipynb"))
        if lessons is not None:
            by_number = {n.name[:2]: n for n in notebooks}
            unknown = [n for n in lessons if n not in by_number]
            if unknown:
                raise ValueError(f"--lessons: {unknown} not among {sorted(by_number)}")
            notebooks = [by_number[n] for n in lessons]
        for notebook in notebooks:
            out.append(Step(f"lesson {notebook.stem}", [*NBVAL, str(notebook)], LESSON_TIMEOUT))
    return out


def run_within(steps: list[Step], budget: float | None, runner, clock=time.monotonic) -> list:
    """Run the steps in order; with a budget (seconds), each step's limit shrinks to what is left,
    and once less than a minute is left the rest are reported as not run."""
    start, outcomes = clock(), []
    for step in steps:
        left = None if budget is None else budget - (clock() - start)
        if left is not None and left < MIN_STEP_SECONDS:
            outcomes.append(Outcome(step.name, False, 0.0, f"not run: --budget {budget:g} s spent"))
            continue
        if left is not None and left < step.timeout:
            step = Step(step.name, step.argv, left)
        outcomes.append(runner(step))
    return outcomes


def run_step(step: Step, python: str = sys.executable, cwd: Path = REPO_ROOT) -> Outcome:
    """Run one step, its output streamed; past its time limit the step's whole process tree
    (a notebook's kernel too) is killed and the step failed."""
    print(f"== {step.name}: {python} {' '.join(step.argv)}", flush=True)
    done = processes.run(
        [python, *step.argv], timeout=step.timeout, cwd=cwd, merge=True, on_line=_show
    )
    if done.timed_out:
        return Outcome(step.name, False, done.seconds, f"killed after {step.timeout:g} s")
    return Outcome(step.name, done.ok, done.seconds, "" if done.ok else done.describe())


def _show(line: str) -> None:
    print(line, end="", flush=True)


def report(outcomes: list[Outcome]) -> str:
    """The summary table: one row per step, then the count of failures."""
    rows = [
        [o.name, "passed" if o.passed else "FAILED", f"{o.seconds:.0f}", o.detail] for o in outcomes
    ]
    failed = sum(not o.passed for o in outcomes)
    table = text_table(["step", "result", "seconds", "detail"], rows, right=[2])
    return f"{table}\n{len(outcomes)} steps, {failed} failed"


def main(argv=None, runner=run_step, cuda_available=None) -> int:
    p = argparse.ArgumentParser(prog="python -m course_utils.tooling.gpu_report")
    p.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated from {STEPS}")
    p.add_argument("--lessons", default=None, help="e.g. 05,02: these lessons, in this order")
    p.add_argument(
        "--budget", type=float, default=None, help="seconds for the whole run; later steps: not run"
    )
    args = p.parse_args(argv)
    chosen = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(STEPS))
    if unknown:
        p.error(f"--steps: {unknown} not among {list(STEPS)}")
    if cuda_available is None:
        import torch

        cuda_available = torch.cuda.is_available()
    if not cuda_available:
        print(
            "make test-gpu needs a CUDA GPU and found none; run it on a GPU node", file=sys.stderr
        )
        return 2
    lessons = None if args.lessons is None else [n.strip() for n in args.lessons.split(",")]
    try:
        steps = plan(chosen, lessons=lessons)
    except ValueError as e:
        p.error(str(e))
    outcomes = run_within(steps, args.budget, runner)
    print(report(outcomes))
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
