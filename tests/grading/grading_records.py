"""Records of cells as a real run writes them: `nbval_record.cell_record` itself, fed the objects
pytest and nbval would hand it (a test item with the cell's outputs, a call with its exception),
so the grader's rules are tested on the very shape they read. No process is started.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from types import SimpleNamespace

import nbformat

from course_utils.grading.exercises import held_out_cases, parse_results
from course_utils.grading.judge.beside import Judge, Verdicts
from course_utils.grading.runner.kernel_watch import KernelDied
from course_utils.grading.runner.nbval_record import cell_record
from course_utils.grading.runner.nbval_runner import Run


def stream(text: str, name: str = "stdout") -> dict:
    return {"output_type": "stream", "name": name, "text": text}


def error(ename: str, evalue: str) -> dict:
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": ["..."]}


def record(
    number: int,
    stdout: str = "",
    *,
    stderr: str = "",
    check: str | None = None,  # the exercise id of a check cell: its outputs are recorded
    raised: tuple[str, str] | None = None,  # (ename, evalue) of an error the cell raised
    problem: Exception | None = None,  # what nbval raised for the cell (a failure)
    died: bool = False,  # the kernel died in this cell (kernel_watch)
) -> dict:
    """One line of the record, as nbval_record writes it for code cell `number`."""
    outputs = [stream(stdout)] if stdout else []
    outputs += [stream(stderr, "stderr")] if stderr else []
    if raised:
        outputs.append(error(*raised))
        problem = problem or RuntimeError("Cell execution caused an exception")
    if died:
        problem = KernelDied("the kernel died while running this cell (signal 11 (SIGSEGV))")
    meta = {"course": {"exercise": check, "role": "check"}} if check else {}
    item = SimpleNamespace(
        test_outputs=outputs,
        cell_num=number,
        cell=nbformat.v4.new_code_cell("", metadata=meta),
        parent=SimpleNamespace(kernel=SimpleNamespace(course_died=died)),
    )
    call = SimpleNamespace(
        excinfo=SimpleNamespace(value=problem) if problem else None, duration=0.25
    )
    return cell_record(item, call)


def cut_off(number: int, seconds: float = 10) -> dict:
    """A cell nbval stopped at the cell time limit."""
    message = f"Timeout of {seconds:g} seconds exceeded executing cell"
    return record(number, problem=RuntimeError(message))


def dead_before(number: int) -> dict:
    """A cell after the one the kernel died in."""
    return record(number, problem=RuntimeError("Kernel dead on test start"))


def run_of(*records: dict, timed_out: bool = False, returncode: int | None = 0) -> Run:
    """A run that wrote `records`; `timed_out`: the notebook's time limit ended it."""
    code = None if timed_out else returncode
    return Run({r["cell"]: r for r in records}, timed_out, code, "")


class FakeJudge:
    """Stands in for `beside.judge_beside` (no judge process starts): an honest kernel's judge,
    whose verdict for each exercise is what its check cell printed (`said`, which a fake runner
    fills), with every held-out case passed for a passing check in a grade with a seed.
    `overrule` gives the judge's own verdict line for an exercise instead (a forged "passed")."""

    def __init__(self):
        # What each notebook's check cells said, per thread: `course grade -j 2` grades two
        # notebooks at once, each beside a judge of its own, in a thread of its own.
        self._here = threading.local()
        self.overrule: dict[str, dict] = {}
        self.seeds: list[int | None] = []

    @property
    def said(self) -> dict[str, str]:
        if not hasattr(self._here, "said"):
            self._here.said = {}
        return self._here.said

    @said.setter
    def said(self, value: dict[str, str]) -> None:
        self._here.said = value

    @contextlib.contextmanager
    def __call__(self, seed, limits, lessons=()):
        self.seeds.append(seed)
        self.said = {}
        judge = Judge(Path("/nonexistent/judge.sock"), runner_end=None)
        yield judge
        judge.verdicts = Verdicts({**verdicts_from(self.said, seed), **self.overrule})


def verdicts_from(said: dict[str, str], seed: int | None) -> dict[str, dict]:
    """The judge's verdict lines for check cells that printed `said` (id -> text)."""
    lines = {}
    for ex_id, text in said.items():
        result = parse_results(text).get(ex_id)
        if result is None:
            continue
        line = {"exercise": ex_id, "verdict": result.verdict, "message": result.message}
        cases = held_out_cases(ex_id)
        if seed is not None and cases and result.passed:
            line.update(held_out=cases, held_out_passed=cases, failures=[])
        lines[ex_id] = line
    return lines
