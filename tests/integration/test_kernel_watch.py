"""runner/kernel_watch: a notebook whose kernel dies fails that cell at once, whether the plugin
is named with -p (as the runner does outside the repository) or comes from the root conftest.py
(a plain `pytest --nbval-lax ...` typed in the repository, as an instructor would)."""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from course_utils.paths import REPO_ROOT

DEATHS = {
    "segfault": "import ctypes\nctypes.string_at(0)",
    "os._exit": "import os\nos._exit(3)",
}
NBVAL = ["--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=120"]


def _dying_notebook(folder: Path, death: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell(DEATHS[death]),
        nbformat.v4.new_code_cell("print(x)"),
    ]
    path = folder / "dies.ipynb"
    nbformat.write(nb, path)
    return path


def _run(argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *argv],
        capture_output=True,
        text=True,
        timeout=200,
        cwd=cwd,
    )
    return done, time.monotonic() - start


def _failed_at_once(done: subprocess.CompletedProcess, seconds: float, death: str) -> None:
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "the kernel died while running this cell" in out, out
    expected = "signal 11 (SIGSEGV)" if death == "segfault" else "exit code 3"
    assert expected in out, out
    assert "Kernel dead on test start" in out  # the cell after it
    assert seconds < 15, f"took {seconds:.0f} s (nbval alone waits the full 120 s cell limit)"


@pytest.mark.parametrize("death", sorted(DEATHS))
def test_a_dead_kernel_fails_its_cell_within_seconds(tmp_path, death):
    path = _dying_notebook(tmp_path, death)
    plugin = ["-p", "course_utils.grading.runner.kernel_watch"]
    done, seconds = _run(
        [*plugin, "-p", "no:cacheprovider", *NBVAL, "-o", "addopts=", "-q", str(path)], tmp_path
    )
    _failed_at_once(done, seconds, death)


def test_a_plain_command_line_in_the_repository_has_the_watch_too():
    """`pytest --nbval-lax NOTEBOOK` from the repository root, no -p, no Makefile."""
    (REPO_ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=REPO_ROOT / "build", prefix="kernel-watch-") as folder:
        path = _dying_notebook(Path(folder), "os._exit")
        done, seconds = _run([*NBVAL, str(path.relative_to(REPO_ROOT))], REPO_ROOT)
    _failed_at_once(done, seconds, "os._exit")
