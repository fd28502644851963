"""Each solution's exercise cells, run alone after the lesson's first cells, pass their checks.

Some checks start processes (05.1 runs the answer under torchrun), hence an integration test.
"""

import contextlib
import io
import linecache
import re

import nbformat
import pytest

from course_utils.grading import run_check
from course_utils.paths import REPO_ROOT
from course_utils.tooling.release import course_meta

SOLUTIONS = sorted((REPO_ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
CHECK_CALL = re.compile(r'check\("(?P<id>\d\d\.\d+)",\s*(?P<args>.*)\)\s*$')


def _run(source: str, name: str, namespace: dict) -> None:
    """exec `source` as a notebook runs a cell: its functions keep their source (inspect)."""
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), namespace)


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.name for p in SOLUTIONS])
def test_reference_answers_pass_in_isolation(path):
    """Each solution's exercise cell, run alone, passes its check (no hidden dependencies)."""
    nb = nbformat.read(path, as_version=4)
    setup = "\n".join(
        c.source for c in nb.cells[:3] if c.cell_type == "code" and not course_meta(c)
    )
    for number, cell in enumerate(nb.cells):
        meta = course_meta(cell)
        if meta.get("role") != "exercise":
            continue
        namespace: dict = {}
        with contextlib.redirect_stdout(io.StringIO()):
            _run(setup, f"<setup of {path.name}>", namespace)
            _run(cell.source, f"<cell {number} of {path.name}>", namespace)
        check_source = next(
            c.source
            for c in nb.cells
            if course_meta(c) == {"exercise": meta["exercise"], "role": "check"}
        )
        args = eval(f"({CHECK_CALL.search(check_source)['args']},)", namespace)
        result = run_check(meta["exercise"], *args)
        assert result.passed, result.line()
