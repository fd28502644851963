"""Every lesson has the course's shape (docs/conventions.md) and passes its own checks."""

import re
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import lesson_exercises, registry
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT

ROOT = REPO_ROOT
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
CHECK_CALL = re.compile(r'check\("(?P<id>\d\d\.\d+)",\s*(?P<args>.*)\)\s*$')


def _lesson(path: Path) -> str:
    return path.name[:2]


@pytest.fixture(params=SOLUTIONS, ids=[p.name for p in SOLUTIONS])
def solution(request):
    return request.param, nbformat.read(request.param, as_version=4)


def test_lesson_shape(solution):
    path, nb = solution
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for heading in ("Learning objectives", "## On the cluster", "## Key points"):
        assert heading in markdown, f"{path.name} lacks '{heading}'"
    assert nb.cells[-1].source.strip() == f'summary("{_lesson(path)}")'


def test_exercises_and_checks_pair_up_in_order(solution):
    path, nb = solution
    lesson = _lesson(path)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    ids = []
    for i, cell in enumerate(cells):
        meta = course_meta(cell)
        if meta.get("role") == "exercise":
            ids.append(meta["exercise"])
            following = course_meta(cells[i + 1])
            assert following == {"exercise": meta["exercise"], "role": "check"}, meta["exercise"]
            assert CHECK_CALL.search(cells[i + 1].source)["id"] == meta["exercise"]
    assert ids == sorted(ids, key=lambda s: int(s.split(".")[1])), "ids out of notebook order"
    assert len(ids) >= 3
    assert set(ids) == {ex.id for ex in lesson_exercises(lesson)}


def test_solution_check_outputs_say_passed(solution):
    """The executed solutions show 'passed' in every check cell (nbval compares these)."""
    _, nb = solution
    for cell in nb.cells:
        if course_meta(cell).get("role") == "check":
            text = "".join(o.get("text", "") for o in cell.outputs)
            assert re.match(r"^\[\d\d\.\d+\] passed: ", text), text


def test_check_cells_never_ignore_output(solution):
    _, nb = solution
    for cell in nb.cells:
        if course_meta(cell).get("role") == "check":
            assert "nbval-ignore-output" not in cell.metadata.get("tags", [])


def test_registered_exercises_all_have_a_lesson():
    lessons = {_lesson(p) for p in SOLUTIONS}
    orphans = [ex_id for ex_id in registry() if ex_id[:2] not in lessons]
    assert orphans == []
