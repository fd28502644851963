"""Records of cells as a real run writes them: `nbval_record.cell_record` itself, fed the objects
pytest and nbval would hand it (a test item with the cell's outputs, a call with its exception),
so the grader's rules are tested on the very shape they read. No process is started.
"""

from __future__ import annotations

from types import SimpleNamespace

import nbformat

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
    return Run({r["cell"]: r for r in records}, timed_out, None if timed_out else returncode, "")
