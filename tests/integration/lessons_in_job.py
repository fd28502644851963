"""The lessons with their kernel inside a Slurm job, in the ways centres start a learner's server
(`make test-in-job`; FACTS and README's "JupyterHub with Slurm" say where each comes from):

    step         the server as an srun job step, as batchspawner starts it
                 (--ntasks=1 --cpus-per-task=4)
    batch-tasks  the server in the batch script itself, cores asked as tasks, as Open OnDemand's
                 Jupyter app often does (--nodes=1 --ntasks-per-node=4)
    batch-cpus   the server in the batch script itself, cores asked as CPUs (--cpus-per-task=4)

Each style is one job whose script starts `pytest --nbval-lax ...` where that style starts the
server; nbval then starts each lesson's kernel in the job, with the job's SLURM_* variables, as
the server would. The lessons are dealt to the styles in turn (05 to the first, 06 to the
second, ...), so each lesson runs once and each style runs at least one; `--every-style` runs
every lesson in every style instead. The styles run one after another, each to the end; the
table gives each lesson's cells passed and failed and its seconds, then each style's time. Job
output and JUnit XML go to test-artifacts/in-job/. Exit code 1 when a cell or a job failed.

    python tests/integration/lessons_in_job.py [--styles "step batch-tasks"] [--every-style] \
        -- PYTEST_OPTIONS... NOTEBOOKS...
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from slurm_utils import REPO, submit

ARTIFACTS = REPO / "test-artifacts" / "in-job"
TIMEOUT = 1800  # per style: four lessons take about 5 minutes on two busy cores


@dataclass(frozen=True)
class Style:
    name: str
    sbatch: tuple[str, ...]  # #SBATCH options: the job a centre asks for
    launcher: str  # what starts the server (here pytest) inside the job


STYLES = {
    s.name: s
    for s in (
        Style(
            "step",
            ("--ntasks=1", "--cpus-per-task=4"),
            'srun --ntasks=1 --cpus-per-task="$SLURM_CPUS_PER_TASK"',
        ),
        Style("batch-tasks", ("--nodes=1", "--ntasks-per-node=4"), "exec"),
        Style("batch-cpus", ("--cpus-per-task=4",), "exec"),
    )
}


def job_script(style: Style, pytest_args: list[str], junit: Path) -> str:
    header = "\n".join(f"#SBATCH {option}" for option in style.sbatch)
    command = " ".join(
        _quote(a)
        for a in [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
            *pytest_args,
        ]
    )
    return f"""#!/bin/bash
#SBATCH --job-name=lessons-in-job-{style.name}
#SBATCH --time=00:30:00
{header}
set -euo pipefail
cd {_quote(str(REPO))}
echo "lessons in job $SLURM_JOB_ID ({style.name}: {" ".join(style.sbatch)}) on $SLURMD_NODENAME"
{style.launcher} {command}
"""


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[\w./=:,+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


@dataclass
class Lesson:
    passed: int = 0
    failed: int = 0
    seconds: float = 0.0
    failures: tuple[str, ...] = ()


def read_junit(path: Path) -> dict[str, Lesson]:
    """Per notebook: cells passed and failed (errors count as failed), seconds, failure lines."""
    lessons: dict[str, Lesson] = defaultdict(Lesson)
    for case in ET.parse(path).iter("testcase"):
        m = re.search(r"(\d\d_\w+)\.ipynb", case.get("classname", "") + case.get("name", ""))
        lesson = lessons[m.group(1) if m else case.get("classname", "?")]
        lesson.seconds += float(case.get("time", 0))
        problem = case.find("failure")
        problem = problem if problem is not None else case.find("error")
        if problem is None:
            lesson.passed += case.find("skipped") is None
            continue
        lesson.failed += 1
        first = (problem.get("message") or problem.text or "").strip().splitlines()[:1]
        lesson.failures += (f"{case.get('name')}: {first[0][:200] if first else '?'}",)
    return dict(sorted(lessons.items()))


def run_style(style: Style, pytest_args: list[str]) -> tuple[bool, list[str]]:
    """Submit one style's job, wait for it; returns (all passed, table lines)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    junit = ARTIFACTS / f"{style.name}.xml"
    junit.unlink(missing_ok=True)
    script = ARTIFACTS / f"{style.name}.sh"
    script.write_text(job_script(style, pytest_args, junit))
    job = submit(script, output_dir=ARTIFACTS)
    result = job.wait(timeout=TIMEOUT)
    (ARTIFACTS / f"{style.name}.out").write_text(result.output)
    shape = " ".join(style.sbatch)
    if not junit.exists():
        tail = "\n".join(result.output.splitlines()[-30:])
        return False, [f"{style.name:12} {shape}: no results (job exit {result.returncode})", tail]
    lines, ok = [], result.returncode == 0
    for name, lesson in read_junit(junit).items():
        lines.append(
            f"{style.name:12} {name:32} {lesson.passed:5} {lesson.failed:6} {lesson.seconds:8.1f}"
        )
        lines += [f"{'':12}   failed {text}" for text in lesson.failures]
        ok = ok and lesson.failed == 0
    lines.append(
        f"{style.name:12} {'(' + shape + ')':32} job {job.job_id}, exit "
        f"{result.returncode}, {result.seconds:.0f} s in all"
    )
    return ok, lines


def deal(pytest_args: list[str], styles: list[str], every_style: bool) -> dict[str, list[str]]:
    """Each style's pytest arguments: the options, then its share of the notebooks (dealt in
    turn, or all of them with `every_style`). A style dealt no notebook gets no job."""
    notebooks = [a for a in pytest_args if a.endswith(".ipynb")]
    options = [a for a in pytest_args if not a.endswith(".ipynb")]
    shares = {
        style: notebooks if every_style else notebooks[i :: len(styles)]
        for i, style in enumerate(styles)
    }
    return {style: options + share for style, share in shares.items() if share}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--styles", default=" ".join(STYLES), help="space-separated: %(default)s")
    parser.add_argument(
        "--every-style", action="store_true", help="every lesson in every style (not dealt)"
    )
    parser.add_argument("pytest_args", nargs="+", help="after --: nbval options and notebooks")
    args = parser.parse_args(argv)
    unknown = [s for s in args.styles.split() if s not in STYLES]
    if unknown:
        parser.error(f"unknown style {unknown}: choose from {', '.join(STYLES)}")
    if not any(a.endswith(".ipynb") for a in args.pytest_args):
        parser.error("no notebook after --: name the lessons' .ipynb files to run")
    table, all_ok = [f"{'style':12} {'lesson':32} {'cells':>5} {'failed':>6} {'seconds':>8}"], True
    for name, pytest_args in deal(args.pytest_args, args.styles.split(), args.every_style).items():
        ok, lines = run_style(STYLES[name], pytest_args)
        all_ok = all_ok and ok
        table += lines
        print("\n".join(lines), flush=True)
    print("\nlessons with the kernel inside a Slurm job (test-artifacts/in-job/):")
    print("\n".join(table))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
