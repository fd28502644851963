"""The course's notebooks as grading reads them: the cell-metadata contract and the release.

A solution notebook's cells carry their role in metadata["course"] (docs/conventions.md):
    exercise cell: metadata["course"] = {"exercise": "04.2", "role": "exercise", "points": 1,
                                         "does": "run"}
    (`does` says what the learner does: one of DOES, defined in docs/conventions.md)
    check cell:    metadata["course"] = {"exercise": "04.2", "role": "check"}
Solution code inside an exercise cell sits between `### BEGIN SOLUTION` and `### END SOLUTION`;
the release (`release_notebook`) replaces each such block with a stub raising NotImplementedError
at the same indent, and clears every output. `course release` (tooling/release.py) writes the
student notebooks with it; the grader builds each grading notebook from it (grader/plan.py); the
runner reads a cell's role with `course_meta`. Torch-free: a stub's title comes from the checker
modules' declarations (catalog.py), not from importing them.
"""

from __future__ import annotations

import ast

import nbformat

from course_utils.grading.catalog import catalog

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
# What an exercise has the learner do (metadata["course"]["does"]):
DOES = {
    "code": "fill in a function",
    "decide": "an HPC decision checked on paper",
    "run": "starts, submits or measures something real, checked on its results",
}


class ReleaseError(ValueError):
    """A solution notebook breaks the conventions the release relies on."""


def course_meta(cell) -> dict:
    return cell.get("metadata", {}).get("course", {})


def exercise_sources(nb) -> dict[str, str]:
    """The source of each exercise cell of notebook `nb`, by exercise id (the last of a repeat)."""
    return {
        course_meta(c)["exercise"]: c.source
        for c in nb.cells
        if c.cell_type == "code" and course_meta(c).get("role") == "exercise"
    }


def stub_solution(source: str, exercise_id: str, title: str) -> str:
    """Replace each BEGIN/END SOLUTION block of `source` by a NotImplementedError stub."""
    out, inside, indent = [], False, ""
    for number, line in enumerate(source.splitlines(), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ReleaseError(f"exercise {exercise_id}: line {number} opens a second {BEGIN}")
            inside, indent = True, line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}# Your code here, then run the check cell below.")
            out.append(f'{indent}raise NotImplementedError("Exercise {exercise_id}: {title}")')
        elif stripped == END:
            if not inside:
                raise ReleaseError(
                    f"exercise {exercise_id}: line {number} has {END} without {BEGIN}"
                )
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ReleaseError(f"exercise {exercise_id}: {BEGIN} is never closed by {END}")
    return "\n".join(out)


def _python_of(source: str) -> ast.Module:
    """A code cell as Python, with IPython's magics and shell escapes turned into calls."""
    from IPython.core.inputtransformer2 import TransformerManager

    return ast.parse(TransformerManager().transform_cell(source))


def _defined_names(tree: ast.Module) -> set[str]:
    """Functions and classes a cell defines at its top level."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in tree.body if isinstance(node, kinds)}


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name a cell binds (def, class, assignment, import)."""
    bound = _defined_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return bound


def _catches_not_implemented(node: ast.AST) -> bool:
    if not isinstance(node, ast.Try):
        return False
    caught = [h.type for h in node.handlers]
    names = {n.id for t in caught if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}
    return "NotImplementedError" in names


def _used_names(node: ast.AST) -> set[str]:
    """Names a cell reads, except inside a `try` that catches a stub's NotImplementedError."""
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) else set()
    children = list(ast.iter_child_nodes(node))
    if _catches_not_implemented(node):  # the guarded body may call a stub: that is its purpose
        children = [*node.handlers, *node.orelse, *node.finalbody]
    return set().union(*(_used_names(child) for child in children))


def check_no_cell_uses_a_stub(cells) -> None:
    """Refuse a notebook whose later cells call a learner's unfinished function.

    In the student version an exercise's function only raises NotImplementedError, so a later
    cell that uses it stops the notebook there. Such cells use the package's implementation
    instead (docs/conventions.md); only the exercise's own check cell may take the learner's.
    """
    stubs: dict[str, str] = {}  # function name -> exercise id
    for number, cell in enumerate(cells, start=1):
        if cell.cell_type != "code":
            continue
        meta = course_meta(cell)
        tree = _python_of(cell.source)
        if meta.get("role") == "exercise":
            stubs.update(dict.fromkeys(_defined_names(tree), meta.get("exercise", "")))
            continue
        if meta.get("role") != "check":
            # A cell that binds the name itself (f = speed.bottleneck) uses its own binding.
            used = sorted(_used_names(tree) & stubs.keys() - _bound_names(tree))
            if used:
                name = used[0]
                raise ReleaseError(
                    f"cell {number} uses {name}(), which exercise {stubs[name]} leaves as a "
                    "stub in the student notebook, so the notebook stops there; use the "
                    f"package's implementation (course_utils) or move the call into the check cell"
                )
        for name in _bound_names(tree):
            stubs.pop(name, None)


def release_notebook(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The student version of a solution notebook: stubs for solutions, no outputs."""
    exercises = catalog()
    check_no_cell_uses_a_stub(solution.cells)
    student = nbformat.from_dict(solution)
    for cell in student.cells:
        meta = course_meta(cell)
        if cell.cell_type != "code":
            continue
        if meta.get("role") == "exercise":
            ex_id = meta.get("exercise", "")
            if ex_id not in exercises:
                raise ReleaseError(f"exercise cell names id {ex_id!r}, which no checker registers")
            does = meta.get("does")
            if does not in DOES:
                kinds = ", ".join(f"{k!r} ({v})" for k, v in DOES.items())
                raise ReleaseError(
                    f"exercise {ex_id}: metadata course.does is {does!r}; say what the learner "
                    f"does with one of {kinds}"
                )
            if BEGIN not in cell.source:
                raise ReleaseError(f"exercise {ex_id}: the cell has no {BEGIN} block to stub out")
            cell.source = stub_solution(cell.source, ex_id, exercises[ex_id].title)
        elif BEGIN in cell.source:
            raise ReleaseError(
                f"a cell without exercise metadata contains {BEGIN}; add metadata['course']"
            )
        cell.outputs, cell.execution_count = [], None
    return student
