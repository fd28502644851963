"""The package's layout holds: lesson helpers, programs (jobs/) and tooling (grading/) apart.

Library code never imports a program or the tooling; programs do not import the tooling; nothing
imports the command line. Read from the source with ast, so a lazy import inside a function
counts too.
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


def _module_name(path) -> str:
    parts = ["course_utils", *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """{module: the course_utils modules it imports}, a lazy import inside a function too.
    `from course_utils.grading import checks` imports the module checks, not the package."""
    modules = {_module_name(p): p for p in MODULES}

    def resolve(name: str) -> str:  # course_utils.data.SyntheticCIFAR10 -> course_utils.data
        while name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                found = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            targets |= {resolve(f) for f in found if f.startswith("course_utils")}
        graph[name] = targets - {name}
    return graph


def _cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path start -> ... -> start, or None (depth-first search)."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph[node]:
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_no_import_circles():
    """A circle (data <-> cifar_standin, hidden by lazy imports) makes two modules one: neither
    can be read, tested or changed alone."""
    graph = _import_graph()
    circles = [c for name in sorted(graph) if (c := _cycle_through(graph, name))]
    assert circles == [], f"import circles: {[' -> '.join(c) for c in circles]}"
