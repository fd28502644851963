"""`course release`: write the student notebooks in notebooks/ from the solutions in solutions/.

The release of one notebook (stubs for solutions, no outputs) and the cell-metadata contract are
grading's (grading/notebooks.py): the grader builds its grading notebooks with the same
function. This module finds the solutions, writes notebooks/ and says what is stale.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.files import atomic_write_text
from course_utils.grading.notebooks import ReleaseError, release_notebook

NOTEBOOK_NAME = re.compile(r"^(?P<lesson>\d\d)_[a-z0-9_]+\.ipynb$")
# How a lesson reports the machine's load beside a timing (timing.CpuLoad; a test holds the two
# together): a stored output recorded above the CPU count timed mostly waiting.
LOAD_REPORT = re.compile(r"load average (?P<load>\d+(?:\.\d+)?) on (?P<cpus>\d+) CPUs?")


def solution_paths(solutions_dir: Path) -> list[Path]:
    return sorted(p for p in solutions_dir.glob("*.ipynb") if NOTEBOOK_NAME.match(p.name))


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


@dataclass
class ReleasePlan:
    writes: dict[Path, str]
    stale: list[Path]  # would change or be created
    orphans: list[Path]  # in notebooks/ with no solution


def plan_release(solutions_dir: Path, notebooks_dir: Path) -> ReleasePlan:
    writes, stale = {}, []
    for path in solution_paths(solutions_dir):
        target = notebooks_dir / path.name
        try:
            text = render(release_notebook(nbformat.read(path, as_version=4)))
        except ReleaseError as error:
            raise ReleaseError(f"{path}: {error}") from None
        writes[target] = text
        if not target.exists() or target.read_text() != text:
            stale.append(target)
    names = {p.name for p in writes}
    orphans = sorted(p for p in notebooks_dir.glob("*.ipynb") if p.name not in names)
    return ReleasePlan(writes, stale, orphans)


def _output_text(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return str(output.get("data", {}).get("text/plain", ""))


def busy_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """The stored outputs of `nb` that report a load average above the machine's CPU count:
    'cell 12: load average 7.6 on 2 CPUs'. Stored outputs are what the site and the lessons
    show; they are recorded on a quiet machine (docs/conventions.md, "Stored outputs")."""
    found = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            for report in LOAD_REPORT.finditer(_output_text(output)):
                if float(report["load"]) > int(report["cpus"]):
                    found.append(f"cell {index}: {report[0]}")
    return found


def busy_solutions(solutions_dir: Path) -> list[str]:
    return [
        f"{path}: {where}"
        for path in solution_paths(solutions_dir)
        for where in busy_outputs(nbformat.read(path, as_version=4))
    ]


def release(solutions_dir: Path, notebooks_dir: Path, check_only: bool = False) -> int:
    """Write (or, with check_only, verify) notebooks/; returns a process exit code."""
    plan = plan_release(solutions_dir, notebooks_dir)
    if check_only:
        for path in plan.stale:
            print(f"stale: {path} differs from its solution; run `course release`")
        for path in plan.orphans:
            print(f"orphan: {path} has no solution in {solutions_dir}; delete it")
        busy = busy_solutions(solutions_dir)
        for where in busy:
            print(
                f"busy: {where}, above its CPU count: the timings beside it mostly waited; "
                "record the lesson again on a quiet machine (docs/conventions.md, "
                '"Stored outputs")'
            )
        bad = plan.stale or plan.orphans or busy
        if not bad:
            print(f"notebooks/ is up to date with solutions/ ({len(plan.writes)} notebooks)")
        return 1 if bad else 0
    notebooks_dir.mkdir(parents=True, exist_ok=True)
    for path in plan.stale:
        atomic_write_text(path, plan.writes[path])
        print(f"wrote {path}")
    for path in plan.orphans:
        print(f"note: {path} has no solution; left in place (delete it by hand if obsolete)")
    print(f"released {len(plan.writes)} notebooks ({len(plan.stale)} changed)")
    return 0
