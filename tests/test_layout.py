"""The package's layout holds: lesson helpers (flat, or a closed family's package: doctor/,
lab/, failing/), programs (jobs/), grading (grading/) and the course's other tooling (tooling/)
apart.

Library code never imports a program, grading or the tooling; programs import neither; nothing
imports the command line. Inside the tooling, the runner (grading/runner/: a notebook run within
limits) never imports the grader (grading/grader/: grades), which imports the runner. Read from
the source with ast, so a lazy import inside a function counts too.
"""

import ast
import re

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


# Every other package is a closed family of helpers that one lesson uses alone (docs/conventions.md,
# held by tests/test_families.py): its modules are lesson helpers all the same.
NOT_HELPERS = ("jobs", "grading", "tooling")


def _kind(path) -> str:
    parts = path.relative_to(PACKAGE_DIR).parts
    return parts[0] if len(parts) > 1 and parts[0] in NOT_HELPERS else "helpers"


MODULES = sorted(PACKAGE_DIR.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_dependencies_point_one_way(path):
    imports = _imports(path)
    kind = _kind(path)
    assert not any(i.startswith("course_utils.cli") for i in imports), "nothing imports the cli"
    tooling = ("course_utils.grading", "course_utils.tooling")
    if kind == "helpers" and path.name != "cli.py":
        assert not any(i.startswith("course_utils.jobs") for i in imports), imports
        assert not any(i.startswith(tooling) for i in imports), imports
    if kind == "jobs":
        assert not any(i.startswith(tooling) for i in imports), imports
    if kind == "grading":  # the release and the metadata contract are grading's; tooling uses them
        assert not any(i.startswith("course_utils.tooling") for i in imports), imports


RUNNER = sorted((PACKAGE_DIR / "grading" / "runner").glob("*.py"))


@pytest.mark.parametrize("path", RUNNER, ids=lambda p: p.name)
def test_the_runner_knows_nothing_of_grades(path):
    """Of grading, a runner module imports only the runner and `notebooks` (a cell's course
    metadata): not the grader, its gradebook writer or an old path that leads there."""
    tooling = {i for i in _imports(path) if i.startswith("course_utils.grading")}
    allowed = ("course_utils.grading.runner", "course_utils.grading.notebooks")
    assert all(i.startswith(allowed) for i in tooling), sorted(tooling)


def _loaded_at_import(module: str) -> set[str]:
    """Every module importing `module` runs: its parent packages, and the imports at the top of
    each (not those inside a function or under TYPE_CHECKING), followed through course_utils."""
    files = {_module_name(p): p for p in MODULES}
    loaded, todo = set(), [module]
    while todo:
        name = todo.pop()
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        for found in (n for n in [*parents, name] if n not in loaded):
            loaded.add(found)
            if found not in files:
                continue
            for node in ast.parse(files[found].read_text()).body:  # the top level only
                if isinstance(node, ast.Import):
                    todo += [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    todo.append(node.module)
                    todo += [f"{node.module}.{a.name}" for a in node.names]
    return {n for n in loaded if n in files or not n.startswith("course_utils")}


def test_a_graded_run_s_plugins_import_no_torch():
    """The runner's two plugins load inside every graded run, whose process only drives the
    kernel: importing torch there cost each notebook about 2 s (grading/__init__.py is lazy)."""
    for plugin in ("nbval_record", "kernel_watch"):
        loaded = _loaded_at_import(f"course_utils.grading.runner.{plugin}")
        assert "course_utils.grading.runner" in loaded and "course_utils.grading" in loaded
        assert not {n for n in loaded if n.split(".")[0] == "torch"}, (plugin, sorted(loaded))


def test_the_grader_uses_the_runner():
    grader = PACKAGE_DIR / "grading" / "grader"
    uses = set().union(*(_imports(p) for p in grader.glob("*.py")))
    assert "course_utils.grading.runner.nbval_runner" in uses


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


LINE_LIMIT = 400


def test_no_module_over_400_lines():
    sizes = {str(p.relative_to(PACKAGE_DIR)): len(p.read_text().splitlines()) for p in MODULES}
    over = {name: n for name, n in sizes.items() if n > LINE_LIMIT}
    assert over == {}, f"over {LINE_LIMIT} lines: {over}; split them"


# A bare write: torch.save, write_text/write_bytes, open(..., "w"/"a"), np.save, savefig.
BARE_WRITE = re.compile(
    r"torch\.save\(|\.write_(text|bytes)\(|\bopen\([^)]*[\"'][wax]b?[\"']|np\.save|savefig\("
)
NOT_RESULTS = {  # writes that are no file of results: a kernel control file, a lock file
    ("jobs/memory_peak.py", 'Path("/proc/self/clear_refs").write_text'),
    # a line of the launcher's own in the log its ranks append to at the same time (O_APPEND)
    ("launching.py", 'with open(log, "a") as f:'),
}


def test_every_writer_of_results_goes_through_files():
    """files.atomic_write (temp file, fsync, os.replace): a crash never leaves half a result.
    Helpers, programs and benchmarks; grading's own scratch files and logs are not results."""
    sources = {
        str(p.relative_to(PACKAGE_DIR)): p
        for p in MODULES
        if _kind(p) in ("helpers", "jobs") and p.name != "files.py"
    }
    root = PACKAGE_DIR.parent
    sources |= {str(p.relative_to(root)): p for p in (root / "benchmarks").glob("*.py")}
    bare = []
    for name, path in sorted(sources.items()):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not BARE_WRITE.search(line) or "atomic_write(" in line:
                continue
            if not any(name == file and text in line for file, text in NOT_RESULTS):
                bare.append(f"{name}:{number}: {line.strip()}")
    assert bare == [], "write through course_utils.files (atomic_write): " + "; ".join(bare)


LESSON = re.compile(r"\b[Ll]essons? \d\d\b")
# The command line is no helper, and the package's own __init__ names no single lesson.
LESSON_NOT_NAMED = {"__init__.py", "cli.py"}


def test_every_helper_names_the_lesson_that_teaches_it():
    """As d2l's helpers say "Defined in :numref:`sec_use_gpu`": a reader of a helper finds the
    lesson that explains it, or reads that no lesson does."""
    helpers = [p for p in MODULES if _kind(p) == "helpers"]
    missing = sorted(
        p.name
        for p in helpers
        if not LESSON.search(ast.get_docstring(ast.parse(p.read_text())) or "")
    )
    assert set(missing) - LESSON_NOT_NAMED == set(), f"docstrings name no lesson: {missing}"
    named = sorted(LESSON_NOT_NAMED - set(missing) - {"__init__.py", "cli.py"})
    assert named == [], f"{named} name their lesson now: take them off LESSON_NOT_NAMED"


# The course's published names under a module that does not define them (docs/conventions.md):
# importable there too, each still defined once. Every other name is imported from its module.
SECOND_NAMES = {
    "distributed.py": {"DistEnv", "expand_hostlist", "launch"},
    "data.py": {"SyntheticCIFAR10"},
    "grading/__init__.py": None,  # the lessons' `from course_utils.grading import check, summary`
}


def _re_exports(path) -> set[str]:
    """Names a module imports from course_utils at its top level and never uses itself."""
    tree = ast.parse(path.read_text())
    imported = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_utils")
        for alias in node.names
    }
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {
        n.value.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
    }
    return imported - used


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_a_name_is_imported_from_the_module_that_defines_it(path):
    name = str(path.relative_to(PACKAGE_DIR))
    allowed = SECOND_NAMES.get(name, set())
    if allowed is None:
        return
    assert _re_exports(path) <= allowed, f"{name} names what another module defines"
