"""The conda route and the pip route install the same tested set."""

import re
from pathlib import Path

import tomllib

import course_utils
from course_utils.paths import REPO_ROOT

ROOT = REPO_ROOT
PIN = re.compile(r"^\s*(?:-\s+)?([A-Za-z0-9_.\-]+)==([^\s#]+)")


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = PIN.match(line)
        if m:
            pins[m[1].lower().replace("_", "-")] = m[2]
    return pins


def test_environment_yml_matches_requirements():
    req, env = _pins(ROOT / "requirements.txt"), _pins(ROOT / "environment.yml")
    assert req == env


def test_requirements_pin_everything_exactly():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    packages = [line for line in lines if line and not line.startswith("#")]
    assert all("==" in p for p in packages), [p for p in packages if "==" not in p]
    pins = _pins(ROOT / "requirements.txt")
    assert pins["torch"] == course_utils.TESTED_TORCH and pins["torchvision"] == "0.29.1"
    for needed in (
        "jupyterlab",
        "ipykernel",
        "ipywidgets",
        "nbval",
        "nbclient",
        "nbformat",
        "matplotlib",
        "pytest",
        "tqdm",
    ):
        assert needed in pins


def test_console_script_declared():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["scripts"]["course"] == "course_utils.cli:main"
