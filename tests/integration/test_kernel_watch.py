"""runner/kernel_watch: a notebook whose kernel dies fails that cell at once."""

import subprocess
import sys
import time

import nbformat
import pytest

DEATHS = {
    "segfault": "import ctypes\nctypes.string_at(0)",
    "os._exit": "import os\nos._exit(3)",
}


@pytest.mark.parametrize("death", sorted(DEATHS))
def test_a_dead_kernel_fails_its_cell_within_seconds(tmp_path, death):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell(DEATHS[death]),
        nbformat.v4.new_code_cell("print(x)"),
    ]
    path = tmp_path / "dies.ipynb"
    nbformat.write(nb, path)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "course_utils.grading.runner.kernel_watch",
         "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
         "--nbval-cell-timeout=120", "-o", "addopts=", "-q", str(path)],
        capture_output=True, text=True, timeout=200, cwd=tmp_path,
    )  # fmt: skip
    seconds = time.monotonic() - start
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "the kernel died while running this cell" in out, out
    expected = "signal 11 (SIGSEGV)" if death == "segfault" else "exit code 3"
    assert expected in out, out
    assert "Kernel dead on test start" in out  # the cell after it
    assert seconds < 15, f"took {seconds:.0f} s (nbval alone waits the full 120 s cell limit)"
