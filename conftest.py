"""Repository-wide pytest hooks: mark notebook cells, report each notebook's execution time, and
load the kernel watch, so that `pytest --nbval-lax notebooks/` typed by hand in the repository
fails a cell whose kernel died at once instead of waiting out the cell time limit."""

from collections import defaultdict
from pathlib import Path

import pytest

pytest_plugins = ["course_utils.grading.runner.kernel_watch"]

_notebook_seconds: dict[str, float] = defaultdict(float)


def pytest_collection_modifyitems(items):
    for item in items:
        if str(item.path).endswith(".ipynb"):
            item.add_marker(pytest.mark.notebook)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        _notebook_seconds[path] += report.duration


def pytest_terminal_summary(terminalreporter):
    if not _notebook_seconds:
        return
    terminalreporter.section("notebook execution times")
    for path, seconds in sorted(_notebook_seconds.items()):
        terminalreporter.write_line(f"{seconds:7.1f} s  {Path(path).as_posix()}")
    terminalreporter.write_line(f"{sum(_notebook_seconds.values()):7.1f} s  total")
