"""The repository cites only what it holds: no file of it sends a reader to a design note or a
list of measured facts kept outside it, or to a number in the project's tracker. A reason the
code needs is written where it is needed (the docstring, a comment, docs/conventions.md), and a
test says what it guards against, not which report found it.

Every text file of the checkout is read (the folders git ignores are skipped: the test starts no
process, so it cannot ask git); a notebook's stored outputs count too. A public project's issue
(`aws/aws-ofi-nccl#715`) is a citation a reader can follow, and is allowed.
"""

import functools
import os
import re
from pathlib import Path

import pytest

from course_utils.paths import REPO_ROOT

# Spelled in two parts, so that this file does not cite them itself.
OUTSIDE = ("DESIGN" + ".md", "FACTS" + ".md")
TRACKER = re.compile(
    r"\b(?:[Ii]ssue|ISSUE|[Tt]icket|PR|[Pp]ull request)s?(?: #?|#|-)\d+\b"
    r"|\b[Ii]ssues? (?:\d+, )*\d+ and \d+\b"
)
IGNORED = {".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", "build"}
IGNORED |= {"data", "runs", "test-artifacts", ".gpu-site", "wheels", "node_modules", "_build"}
TEXT = {".py", ".md", ".ipynb", ".sh", ".cfg", ".toml", ".txt", ".yml", ".yaml", ".json", ".log"}
TEXT |= {".cpp", ".h", ".cmake", ".ini", ".gitignore", ""}


def _ignored(part: str) -> bool:
    return part in IGNORED or part.startswith(".venv") or part.endswith(".egg-info")


@functools.cache
def _text_files() -> list:
    found = []
    for folder, subfolders, files in os.walk(REPO_ROOT):
        subfolders[:] = [d for d in subfolders if not _ignored(d)]  # never walk into .venv
        for name in files:
            path = Path(folder) / name
            if path.suffix in TEXT or name == "Makefile":
                found.append(path)
    return sorted(found)


def _citations(text: str) -> list[str]:
    return [name for name in OUTSIDE if name in text] + [m[0] for m in TRACKER.finditer(text)]


def test_the_checkout_is_read():
    names = {str(p.relative_to(REPO_ROOT)) for p in _text_files()}
    for held in ("README.md", "Makefile", "docs/conventions.md", ".ci/run", "tests/conftest.py"):
        assert held in names, held


def test_no_file_cites_what_the_repository_does_not_hold():
    cited = {}
    for path in _text_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if found := _citations(text):
            cited[str(path.relative_to(REPO_ROOT))] = found
    assert cited == {}, f"write the reason itself, not where it was found: {cited}"


@pytest.mark.parametrize(
    "line",
    [
        f"# {OUTSIDE[0]} lists these under this module",
        f'"""Issue {32}: the end points passed."""',  # numbers in braces: no citation here
        f"the answer before issue {22}",
        f"forged evidence (issue #{30})",
        f"as issues {22}, 30 and 32 found",
        f"see PR {12}",
    ],
)
def test_a_citation_is_seen(line):
    assert _citations(line)


@pytest.mark.parametrize(
    "line",
    [
        "as in aws/aws-ofi-nccl#715's log",
        "rank 0: last collective entered #3 all_reduce",
        "color:#060",
        "an issue with 2 ranks",
    ],
)
def test_what_is_no_citation_passes(line):
    assert not _citations(line)
