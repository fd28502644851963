"""Every package's index is kept true: its `__init__.py` docstring names each of its modules and
subpackages, and only those, as tests/test_map.py keeps README's map.

An index line is a docstring line indented by four spaces that starts with a file's name, then
two spaces or the line's end: `    report.py    collects the rows` (a module), `    judge/    the
judge` (a subpackage), `    sanitize.cfg    nbval's rules` (another file the package holds).
Lines indented further continue the line above.
"""

import ast
import re

import pytest

from course_utils.paths import PACKAGE_DIR, REPO_ROOT

INDEX_LINE = re.compile(r"^ {4}(\w+(?:\.\w+|/))(?: {2,}|$)")
PACKAGES = sorted(
    p.parent
    for root in (PACKAGE_DIR, REPO_ROOT / "benchmarks")
    for p in [root / "__init__.py", *root.rglob("*/__init__.py")]
)


def _indexed(package) -> list[str]:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return [m[1] for line in docstring.splitlines() if (m := INDEX_LINE.match(line))]


def _contents(package) -> set[str]:
    """The package's modules (x.py, but __init__.py) and subpackages (x/)."""
    modules = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    return modules | {p.parent.name + "/" for p in package.glob("*/__init__.py")}


def _name(package) -> str:
    return str(package.relative_to(REPO_ROOT))


def test_every_package_is_held():
    names = {_name(p) for p in PACKAGES}
    assert {"course_utils", "course_utils/grading/runner", "benchmarks"} <= names, names


@pytest.mark.parametrize("package", PACKAGES, ids=_name)
def test_the_index_names_every_module(package):
    missing = sorted(_contents(package) - set(_indexed(package)))
    assert missing == [], f"{_name(package)}/__init__.py does not index {missing}"


@pytest.mark.parametrize("package", PACKAGES, ids=_name)
def test_the_index_names_only_what_is_there(package):
    """Each entry once, and each a module, a subpackage or another file of the package
    (a folder of data, such as reference/, too)."""
    entries = _indexed(package)
    assert len(entries) == len(set(entries)), f"{_name(package)} indexes twice: {entries}"
    stale = [e for e in entries if not (package / e.rstrip("/")).exists()]
    assert stale == [], f"{_name(package)}/__init__.py indexes what is not there: {stale}"
