"""The grading plan: the notebook a submission is graded with, and where each exercise sits in it.

For each submission the grader builds a *grading notebook* from the released notebook (made from
solutions/ as `course release` makes notebooks/): every cell comes from the release except the
learner's exercise cells, matched by the exercise id in their metadata (so reordered,
duplicated or deleted cells do not matter). It carries no outputs: the reference outputs of
solutions/ stay with the grader (`Lesson.reference`), and check cells are compared with them
outside the run (verdicts.compare_checks).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_utils.grading.catalog import catalog
from course_utils.grading.grader.flags import cell_flags
from course_utils.grading.notebooks import course_meta, exercise_sources, release_notebook

# Prepended to every check cell: an exercise cell that rebinds `check` changes nothing.
FRESH_CHECK = "from course_utils.grading import check  # added by course grade"


@dataclass
class Lesson:
    """The instructor's side of a lesson: the released notebook and the reference check outputs.

    The release is made from solutions/ as `course release` makes it (`course release --check`
    keeps notebooks/ equal to it), so a learner's edited copy in notebooks/ is never the reference.
    """

    lesson: str
    release: nbformat.NotebookNode
    reference: dict[str, list]  # exercise id -> outputs of its check cell in solutions/

    @classmethod
    def load(cls, lesson: str, solutions: Path) -> Lesson:
        matches = sorted(solutions.glob(f"{lesson}_*.ipynb"))
        if not matches:
            raise ValueError(
                f"lesson {lesson}: no solution notebook {lesson}_*.ipynb in "
                f"{solutions}; grade a lesson that exists"
            )
        return cls.from_solution(lesson, nbformat.read(matches[0], as_version=4))

    @classmethod
    def from_solution(cls, lesson: str, solution: nbformat.NotebookNode) -> Lesson:
        reference = {
            course_meta(c)["exercise"]: c.outputs
            for c in solution.cells
            if c.cell_type == "code" and course_meta(c).get("role") == "check"
        }
        return cls(lesson, release_notebook(solution), reference)


@dataclass
class GradingPlan:
    notebook: nbformat.NotebookNode
    cells: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (exercise, check) cell
    points: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)  # the learner's exercise cells, by id

    @functools.cached_property
    def flags(self) -> list[str]:
        """The review flags of the learner's cells, read when first asked (the grader asks
        after the run: parsing cells costs seconds of IPython's import the run need not wait)."""
        return review_flags(self.answers)

    def code_cell_count(self) -> int:
        return sum(c.cell_type == "code" for c in self.notebook.cells)

    def where(self, number: int | None) -> str:
        """ " (exercise 01.2)", " (check of 01.2)" or "" for code cell `number`."""
        for ex_id, (exercise, check) in self.cells.items():
            if number == exercise:
                return f" (exercise {ex_id})"
            if number == check:
                return f" (check of {ex_id})"
        return ""


def learner_exercises(nb: nbformat.NotebookNode, stubs: dict[str, str]) -> tuple[dict, list]:
    """Source of each exercise cell of a submission, by id, and notes on what was chosen.

    Of several cells with the same id, the last one the learner changed from the released stub
    is taken (else the last one).
    """
    copies: dict[str, list[str]] = {}
    for cell in nb.cells:
        meta = course_meta(cell) if isinstance(cell.get("metadata"), dict) else {}
        if cell.cell_type == "code" and meta.get("role") == "exercise":
            copies.setdefault(str(meta.get("exercise")), []).append(str(cell.source))
    chosen, notes = {}, []
    for ex_id, stub in stubs.items():
        sources = copies.get(ex_id, [])
        if not sources:
            notes.append(f"exercise {ex_id}: no exercise cell found; the released stub was graded")
            continue
        edited = [s for s in sources if s.strip() != stub.strip()]
        chosen[ex_id] = (edited or sources)[-1]
        if len(sources) > 1:
            notes.append(
                f"exercise {ex_id}: {len(sources)} cells carry this id; the last edited "
                "one was graded"
            )
    return chosen, notes


def build_grading_notebook(lesson: Lesson, submission: nbformat.NotebookNode) -> GradingPlan:
    """The release with the learner's exercise cells, and no outputs at all.

    Every cell's execution_count is None, so nbval only runs it (and nbval_record records its
    outputs); check cells are compared with `lesson.reference` outside the run (`compare_checks`).
    """
    nb = nbformat.from_dict(lesson.release)
    answers, notes = learner_exercises(submission, exercise_sources(nb))
    plan = GradingPlan(nb, notes=notes)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    for number, cell in enumerate(code_cells):
        meta = course_meta(cell)
        cell.outputs, cell.execution_count = [], None
        ex_id = meta.get("exercise")
        if meta.get("role") == "exercise":
            cell.source = answers.get(ex_id, cell.source)
            plan.points[ex_id] = int(meta.get("points", 1))
            plan.cells[ex_id] = (number, -1)
        elif meta.get("role") == "check":
            if ex_id not in lesson.reference:
                raise ValueError(
                    f"lesson {lesson.lesson}: solutions/ has no check cell for "
                    f"{ex_id}; rebuild the solution notebook"
                )
            cell.source = f"{FRESH_CHECK}\n{cell.source}"
            plan.cells[ex_id] = (plan.cells.get(ex_id, (-1, -1))[0], number)
    plan.answers = answers
    return plan


def review_flags(answers: dict[str, str]) -> list[str]:
    """Things in the exercise cells an instructor may want to read (flags.py); they do not
    change points. A flag the exercise itself calls for (its `allows`) is not raised for it; an
    answer that reaches the course's own implementation of the exercise (its `reference`),
    under any name, is."""
    known = catalog()
    flags = []
    for ex_id, source in sorted(answers.items()):
        entry = known.get(ex_id)
        allowed = set(entry.allows) if entry else set()
        reference = entry.reference if entry else ()
        flags += [f"{ex_id}: {flag}" for flag in cell_flags(source, allowed, reference)]
    return flags
