"""The package's layout holds: lesson helpers, programs (jobs/) and tooling (grading/) apart.

Library code never imports a program or the tooling; programs do not import the tooling; nothing
imports the command line. Inside the tooling, the runner (grading/runner/: a notebook run within
limits) never imports the grader (grading/grader/: grades), which imports the runner. Read from
the source with ast, so a lazy import inside a function counts too.
"""

import ast

import pytest

from course_utils.paths import PACKAGE_DIR


def _imports(path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return {name for name in found if name.startswith("course_utils")}


def _kind(path) -> str:
    parts = path.relative_to(PACKAGE_DIR).parts
    return parts[0] if len(parts) > 1 else "helpers"


MODULES = sorted(PACKAGE_DIR.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_dependencies_point_one_way(path):
    imports = _imports(path)
    kind = _kind(path)
    assert not any(i.startswith("course_utils.cli") for i in imports), "nothing imports the cli"
    if kind == "helpers" and path.name != "cli.py":
        assert not any(i.startswith("course_utils.jobs") for i in imports), imports
        assert not any(i.startswith("course_utils.grading") for i in imports), imports
    if kind == "jobs":
        assert not any(i.startswith("course_utils.grading") for i in imports), imports


RUNNER = sorted((PACKAGE_DIR / "grading" / "runner").glob("*.py"))


@pytest.mark.parametrize("path", RUNNER, ids=lambda p: p.name)
def test_the_runner_knows_nothing_of_grades(path):
    """Of the tooling, a runner module imports only the runner and `release` (a cell's course
    metadata): not the grader, its gradebook writer or an old path that leads there."""
    tooling = {i for i in _imports(path) if i.startswith("course_utils.grading")}
    allowed = ("course_utils.grading.runner", "course_utils.grading.release")
    assert all(i.startswith(allowed) for i in tooling), sorted(tooling)


def test_the_grader_uses_the_runner():
    grader = PACKAGE_DIR / "grading" / "grader"
    uses = set().union(*(_imports(p) for p in grader.glob("*.py")))
    assert "course_utils.grading.runner.nbval_runner" in uses


OLD_PATHS = ("sandbox", "nbval_runner", "gradebook", "learner", "kernel_watch")


@pytest.mark.parametrize("name", OLD_PATHS)
def test_an_old_grading_path_holds_no_code(name):
    """grading/sandbox.py and friends only forward names to the rooms (grading/_moved.py)."""
    tree = ast.parse((PACKAGE_DIR / "grading" / f"{name}.py").read_text())
    kinds = {type(node).__name__ for node in tree.body}
    assert kinds <= {"Expr", "ImportFrom", "Assign"}, kinds  # docstring, imports, __getattr__


def test_grading_modules_are_under_400_lines():
    grading = sorted((PACKAGE_DIR / "grading").rglob("*.py"))
    long = [
        str(p.relative_to(PACKAGE_DIR)) for p in grading if len(p.read_text().splitlines()) > 400
    ]
    assert long == []


def test_every_program_runs_as_a_module():
    jobs = [p for p in (PACKAGE_DIR / "jobs").glob("*.py") if p.name != "__init__.py"]
    assert len(jobs) >= 8
    for path in jobs:
        assert 'if __name__ == "__main__":' in path.read_text(), f"{path.name} is not a program"
    listed = (PACKAGE_DIR / "jobs" / "__init__.py").read_text()
    assert all(p.stem in listed for p in jobs), "jobs/__init__.py lists every program"


def test_no_helper_is_a_program():
    helpers = [p for p in PACKAGE_DIR.glob("*.py") if p.name not in ("cli.py", "__init__.py")]
    programs = [p.name for p in helpers if '__name__ == "__main__"' in p.read_text()]
    assert programs == [], f"programs belong in course_utils/jobs/: {programs}"


def test_test_files_have_unique_names():
    # pytest imports test modules by their base name (tests/ has no __init__.py): two files of
    # one name in different folders stop the whole run at collection
    from collections import Counter

    names = Counter(p.name for p in (PACKAGE_DIR.parent / "tests").rglob("test_*.py"))
    assert [n for n, count in names.items() if count > 1] == []
