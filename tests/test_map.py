"""README's "Map of the course" is kept true: every helper, program, batch script and test file is
in its table (lesson -> helpers -> programs -> slurm script -> tests) or under a rule it states
below the table, and every name in the table exists.

A table cell names things in backticks: a helper as `device`, a family module as `lab/cluster`
(or the whole family, `lab/*`), a program as `train_cifar`, a script as `cpu_job.sh`, a test as
`test_hpc` or `integration/test_lab_*` (globs allowed, relative to tests/). The rules are the
backticked paths (globs, relative to the repository) in the bullets that follow the table.
"""

import fnmatch
import re

import pytest

from course_utils.paths import PACKAGE_DIR, REPO_ROOT

README = REPO_ROOT / "README.md"
TICKS = re.compile(r"`([^`]+)`")


def _map_section() -> str:
    text = README.read_text()
    start = text.index("### Map of the course")
    end = text.index("\n## ", start)
    return text[start:end]


def _table_and_rules() -> tuple[dict[str, list[set[str]]], list[str]]:
    """{lesson: [helpers, programs, slurm, tests]} and the rule globs."""
    rows, rules, after_table = {}, [], False
    for line in _map_section().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and re.fullmatch(r"\d\d", cells[0]):
            rows[cells[0]] = [set(TICKS.findall(c)) for c in cells[1:5]]
            after_table = True
        elif after_table:  # the bullets below the table, their continuation lines too
            rules += [t for t in TICKS.findall(line) if "/" in t]
    return rows, rules


def _named(column: int) -> set[str]:
    rows, _ = _table_and_rules()
    return set().union(*(row[column] for row in rows.values()))


def _by_rule(path) -> bool:
    _, rules = _table_and_rules()
    relative = str(path.relative_to(REPO_ROOT))
    return any(fnmatch.fnmatch(relative, rule) for rule in rules)


def _helper_name(path) -> str:
    return str(path.relative_to(PACKAGE_DIR).with_suffix(""))  # "device", "lab/cluster"


def _helper_covered(name: str, named: set[str]) -> bool:
    tokens = {t.replace(".", "/").removesuffix("/py") for t in named}
    family = name.split("/")[0] + "/*"
    return name in tokens or family in tokens


HELPERS = [
    p
    for p in sorted(PACKAGE_DIR.rglob("*.py"))
    if p.relative_to(PACKAGE_DIR).parts[0] not in ("jobs", "grading", "tooling")
    and p.name != "__init__.py"
]
PROGRAMS = sorted(p for p in (PACKAGE_DIR / "jobs").glob("*.py") if p.name != "__init__.py")
SCRIPTS = sorted((REPO_ROOT / "slurm").glob("*.sh"))
TESTS = sorted((REPO_ROOT / "tests").rglob("test_*.py"))


def test_the_map_has_a_row_per_lesson():
    rows, rules = _table_and_rules()
    assert sorted(rows) == [f"{n:02d}" for n in range(11)]
    assert rules, "the rules below the table"


@pytest.mark.parametrize("path", HELPERS, ids=_helper_name)
def test_every_helper_is_on_the_map(path):
    name = _helper_name(path)
    assert _helper_covered(name, _named(0)) or _by_rule(path), f"README's map misses `{name}`"


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_every_program_is_on_the_map(path):
    assert path.stem in _named(1) or _by_rule(path), f"README's map misses `{path.stem}`"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_batch_script_is_on_the_map(path):
    assert path.name in _named(2) or _by_rule(path), f"README's map misses `{path.name}`"


def _test_covered(path) -> bool:
    relative = str(path.relative_to(REPO_ROOT / "tests").with_suffix(""))
    return any(fnmatch.fnmatch(relative, token.removesuffix(".py")) for token in _named(3))


@pytest.mark.parametrize("path", TESTS, ids=lambda p: str(p.relative_to(REPO_ROOT / "tests")))
def test_every_test_file_is_on_the_map(path):
    assert _test_covered(path) or _by_rule(path), f"README's map misses {path.name}"


def test_every_name_on_the_map_exists():
    helpers = {_helper_name(p) for p in HELPERS}
    families = {name.split("/")[0] + "/*" for name in helpers if "/" in name}
    for token in _named(0):
        name = token.replace(".", "/").removesuffix("/py")
        assert name in helpers or name in families, f"`{token}` is no helper"
    assert _named(1) <= {p.stem for p in PROGRAMS}, _named(1) - {p.stem for p in PROGRAMS}
    assert _named(2) <= {p.name for p in SCRIPTS}, _named(2) - {p.name for p in SCRIPTS}
    tests = [str(p.relative_to(REPO_ROOT / "tests").with_suffix("")) for p in TESTS]
    for token in _named(3):
        assert fnmatch.filter(tests, token.removesuffix(".py")), f"`{token}` names no test file"
