"""The rule for packages of helpers (docs/conventions.md, "Layout"): the helpers that one lesson
uses alone are a family, and a family of three or more is a package of its own; a package's
modules are used by its lesson alone.

"Uses" is read from imports (ast, so a lazy import inside a function counts) in every module of
course_utils, every benchmark and the code cells of every solution notebook. A lesson's own code
is its notebook, its checker and probes (grading/checks/lessonNN*.py, grading/probes/lessonNN.py),
the programs of its row alone in README's map, and the benchmarks its row names
(`benchmarks/NAME.py`). Everything else (a flat helper, the command line, the tooling, grading's
machinery, a program two lessons run) is shared. Tests are not users.
"""

import ast
import functools
import json
import re

import pytest
import test_map as the_map

from course_utils.paths import PACKAGE_DIR, REPO_ROOT

# From three helpers on, a lesson's own code is a family worth an index of its own; two read as
# well side by side in course_utils/.
FAMILY_SIZE = 3

# Who else may import a family's module, and why: each a reader across lessons, listed so that
# the list stays closed (test_the_listed_readers_still_read).
READERS = {
    ("doctor", "course_utils.cli"): "`course doctor` is the command's report",
    ("doctor", "07"): "lesson 07 decides between a driver update and a rebuild with the "
    "doctor's verdict on a build (doctor.gpu.build_verdict, the one definition)",
    ("failing.flight_recorder", "course_utils.launching"): "launching.run_ranks, lesson 09's "
    "ranks, dumps the flight record of a rank that fails",
    ("failing.flight_recorder", "course_utils.doctor.routes"): "`course doctor` says what each "
    "lesson does on this PyTorch, from the lesson's own feature detection",
}


def _modules() -> dict[str, str]:
    """{course_utils.x.y: source} of every module of the package."""
    found = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = ["course_utils", *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return found


MODULES = _modules()


def _imported(source: str) -> set[str]:
    """The course_utils modules a source imports (`from course_utils import x` imports x)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    found = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return {name for name in found if name in MODULES}


@functools.cache
def _users() -> dict[str, set[str]]:
    """{user: the course_utils modules it imports}: modules, benchmarks, notebooks ("09")."""
    users = {name: _imported(source) for name, source in MODULES.items()}
    for path in sorted((REPO_ROOT / "benchmarks").glob("*.py")):
        users[f"benchmarks.{path.stem}"] = _imported(path.read_text())
    for path in sorted((REPO_ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        users[path.name[:2]] = set().union(*(_imported(source) for source in code))
    return users


@functools.cache
def _rows() -> dict[str, str]:
    """{lesson: its row of README's map, as text}."""
    return {
        line.split("|")[1].strip(): line
        for line in the_map._map_section().splitlines()
        if re.match(r"\| \d\d \|", line)
    }


def _lesson_of(user: str, rows: dict[str, str]) -> str | None:
    """The one lesson whose own code `user` is, or None (shared)."""
    if re.fullmatch(r"\d\d", user):
        return user
    if found := re.fullmatch(r"course_utils\.grading\.(checks|probes)\.lesson(\d\d)(_\w+)?", user):
        return found[2]
    kind, _, name = user.rpartition(".")
    if kind == "course_utils.jobs":
        named = [n for n, row in rows.items() if f"`{name}`" in row.split("|")[3]]
    elif kind == "benchmarks":
        named = [n for n, row in rows.items() if f"benchmarks/{name}.py" in row]
    else:
        return None
    return named[0] if len(named) == 1 else None


@functools.cache
def _packages() -> dict[str, str]:
    """{package: its lesson}: the one row of README's map that names it as `package/*`."""
    rows = _rows()
    packages = {}
    for path in sorted(PACKAGE_DIR.glob("*/__init__.py")):
        name = path.parent.name
        if name in ("jobs", "grading", "tooling"):
            continue
        lessons = [n for n, row in rows.items() if f"`{name}/*`" in row.split("|")[2]]
        assert len(lessons) == 1, f"{name}/ is named by the helpers of lessons {lessons}, not one"
        packages[name] = lessons[0]
    return packages


def _strangers(package: str, lesson: str, users, rows) -> list[tuple[str, str]]:
    """(module, user) for each import of a module of `package` from outside its lesson."""
    prefix = f"course_utils.{package}"
    found = []
    for user, imported in sorted(users.items()):
        if user == prefix or user.startswith(prefix + "."):
            continue
        for module in sorted(m for m in imported if m.startswith(prefix + ".")):
            if _lesson_of(user, rows) != lesson:
                found.append((module.removeprefix("course_utils."), user))
    return found


def _reads(module: str, user: str, held: str, reader: str, rows) -> bool:
    """Whether `user` importing `module` is the listed reader of `held` (a lesson: its code)."""
    ours = module == held or module.startswith(held + ".")
    return ours and reader in (user, _lesson_of(user, rows))


def test_every_package_of_helpers_has_one_lesson():
    assert set(_packages()) >= {"doctor", "lab", "failing"}


@pytest.mark.parametrize("package", sorted(_packages()))
def test_a_package_is_used_by_its_lesson_alone(package):
    lesson = _packages()[package]
    users, rows = _users(), _rows()
    strangers = [
        f"{user} imports {module}"
        for module, user in _strangers(package, lesson, users, rows)
        if not any(_reads(module, user, *pair, rows) for pair in READERS)
    ]
    assert strangers == [], (
        f"{package}/ is lesson {lesson}'s: keep the module flat where another lesson or a shared "
        f"helper uses it, or list a reader across lessons in READERS: {strangers}"
    )


def test_the_listed_readers_still_read():
    users, rows, packages = _users(), _rows(), _packages()
    read = {
        (module, user)
        for package, lesson in packages.items()
        for module, user in _strangers(package, lesson, users, rows)
    }
    stale = [pair for pair in READERS if not any(_reads(m, u, *pair, rows) for m, u in read)]
    assert stale == [], f"no longer read across lessons: take them off READERS: {stale}"


def _closed_helpers(users, rows) -> dict[str, set[str]]:
    """{lesson: the flat helpers only that lesson's own code (and each other) imports}."""
    flat = {
        name
        for name in MODULES
        if name.count(".") == 1 and name not in ("course_utils.cli", "course_utils.__init__")
    }
    importers = {h: {u for u, imported in users.items() if h in imported} for h in flat}
    owner = {}
    for helper in flat:
        lessons = {_lesson_of(u, rows) for u in importers[helper] if u not in flat}
        if len(lessons) == 1 and None not in lessons:
            owner[helper] = lessons.pop()
    changed = True
    while changed:  # a helper imported by a flat helper of another lesson, or a shared one
        changed = False
        for helper, lesson in list(owner.items()):
            if any(owner.get(u) != lesson for u in importers[helper] if u in flat):
                del owner[helper]
                changed = True
    closed = {}
    for helper, lesson in owner.items():
        closed.setdefault(lesson, set()).add(helper.removeprefix("course_utils."))
    return closed


def test_a_lesson_s_own_helpers_of_three_or_more_are_a_package():
    closed = _closed_helpers(_users(), _rows())
    families = {lesson: sorted(h) for lesson, h in closed.items() if len(h) >= FAMILY_SIZE}
    assert families == {}, f"helpers only one lesson uses: make each a package: {families}"
