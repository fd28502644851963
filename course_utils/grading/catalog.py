"""The exercises as the checker modules declare them, read without importing them (torch-free).

Each `@exercise("01.2", "title", points=..., allows=(...), reference=(...))` and each
`@held_out("01.2", cases=N)` in grading/checks/*.py is read from its syntax tree: literals, and
names of tuples defined at the top of the same module (`*FORGED`). The release (a stub's title),
the grader (titles, held-out counts, the review flags' `allows` and `reference`) and `course
release` need only this, and so never import torch or a checker; the judge, which runs the
checkers, imports them (exercises.registry). tests/grading/test_exercises.py keeps the two
readings equal.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

CHECKS = Path(__file__).parent / "checks"


@dataclass(frozen=True)
class Entry:
    id: str
    title: str
    points: int = 1
    allows: tuple[str, ...] = ()
    reference: tuple[str, ...] = ()
    held_out: int = 0  # cases only the instructor's grade runs


def _constants(tree: ast.Module) -> dict[str, object]:
    """The module's top-level names bound to a literal (FORGED = (r"...", ...))."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return found


def _value(node: ast.expr, constants: dict):
    """A decorator argument: a literal, a module constant, or a tuple of them with *starred
    constants spread in."""
    if isinstance(node, ast.Name):
        return constants[node.id]
    if isinstance(node, ast.Tuple):
        items = []
        for item in node.elts:
            if isinstance(item, ast.Starred):
                items += list(_value(item.value, constants))
            else:
                items.append(_value(item, constants))
        return tuple(items)
    return ast.literal_eval(node)


def _decorations(path: Path):
    """(decorator name, its arguments as values) of each decorated function of `path`."""
    tree = ast.parse(path.read_text())
    constants = _constants(tree)
    for node in tree.body:
        for call in getattr(node, "decorator_list", []):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                args = [_value(a, constants) for a in call.args]
                kwargs = {k.arg: _value(k.value, constants) for k in call.keywords}
                yield call.func.id, args, kwargs


@functools.cache
def catalog() -> dict[str, Entry]:
    """Every exercise the checker modules declare, by id, in id order."""
    entries, cases = {}, {}
    for path in sorted(CHECKS.glob("*.py")):
        for name, args, kwargs in _decorations(path):
            if name == "exercise":
                ex_id, title, *rest = args
                points = rest[0] if rest else kwargs.get("points", 1)
                entries[ex_id] = dict(
                    title=title,
                    points=points,
                    allows=tuple(kwargs.get("allows", ())),
                    reference=tuple(kwargs.get("reference", ())),
                )
            elif name == "held_out":
                cases[args[0]] = args[1] if len(args) > 1 else kwargs["cases"]
    ordered = sorted(entries, key=lambda i: tuple(map(int, i.split("."))))
    return {i: Entry(i, **entries[i], held_out=cases.get(i, 0)) for i in ordered}


def prepares_runs(lesson: str) -> list[str]:
    """The checker modules of `lesson` that define `prepare_runs` (work `course grade` does once
    before the sandboxed runs, lesson 07's C++ builds), found without importing them."""
    return [
        path.stem
        for path in sorted(CHECKS.glob(f"lesson{lesson}*.py"))
        if any(
            isinstance(node, ast.FunctionDef) and node.name == "prepare_runs"
            for node in ast.parse(path.read_text()).body
        )
    ]
