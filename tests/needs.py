"""What a marked test needs, and why it cannot run here: the one source of skip reasons.

tests/conftest.py asks `problem(marker)` before each test marked gpu, slurm, browser, cpp,
ccache, shellcheck, bwrap or container. Where the answer is a reason, the test is skipped with
it; under CI (CI=true) the system parts CI installs must be there, so a missing one fails the
test instead of hiding it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import time
from pathlib import Path

import torch

# Installed by .ci/run (apt) and .ci/browser-setup.sh: CI must run these tests.
CI_MUST_RUN = {"slurm", "browser", "cpp", "ccache", "shellcheck", "bwrap", "container"}
# The course's image as `make container` writes it (the container tests run in it with ch-run).
IMAGE = Path(__file__).resolve().parents[1] / "build" / "container" / "course.sqfs"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def gpu() -> str | None:
    if torch.cuda.is_available():
        return None
    return "needs a CUDA GPU (marked gpu; `make test-gpu` runs these on a GPU node)"


def slurm(settle: float = 90) -> str | None:
    """Why no job can run here (no sbatch, no controller, no usable node), or None.

    Nodes still completing a cancelled job ("comp") are waited for, up to `settle` seconds: they
    are busy, not gone, and one slow job must not fail the tests after it.
    """
    if not shutil.which("sbatch"):
        return "Slurm is not installed (no sbatch); CI starts one with .ci/slurm-cluster.sh start"
    deadline = time.monotonic() + settle
    while True:
        try:
            out = subprocess.run(
                ["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"sinfo failed: {e}"
        states = [s.rstrip("*~#") for s in out.stdout.split()]
        if out.returncode == 0 and any(s in ("idle", "mix", "alloc") for s in states):
            return None
        if out.returncode != 0 or "comp" not in states or time.monotonic() > deadline:
            detail = (out.stderr or out.stdout).strip() or "no nodes"
            return f"no Slurm cluster is up ({detail}); start one with .ci/slurm-cluster.sh start"
        time.sleep(2)


@functools.cache
def browser() -> str | None:
    from browser_support import CENTRE, CHROMIUM, PROXY, SETUP_HINT

    needs = {
        "Python package playwright": importlib.util.find_spec("playwright") is not None,
        f"Chromium at {CHROMIUM}": Path(CHROMIUM).exists(),
        f"JupyterHub in {CENTRE}": (CENTRE / "bin" / "jupyterhub").exists(),
        f"configurable-http-proxy at {PROXY}": PROXY.exists(),
    }
    missing = [what for what, ok in needs.items() if not ok]
    return f"{', '.join(missing)} not found ({SETUP_HINT})" if missing else None


@functools.cache
def cpp() -> str | None:
    from course_utils.cpp import toolchain_missing

    missing = toolchain_missing()
    return f"C++ toolchain: {missing}" if missing else None


@functools.cache
def ccache() -> str | None:
    """Why the course's C++ builds compile without ccache here (lesson 07's example then
    compiles cold), or None."""
    reason = cpp()
    if reason:
        return reason
    return None if shutil.which("ccache") else "ccache is not installed (apt-get install ccache)"


@functools.cache
def shellcheck() -> str | None:
    return None if shutil.which("shellcheck") else "shellcheck is not installed (apt-get install)"


@functools.cache
def bwrap() -> str | None:
    """Why `course grade` cannot run its bubblewrap sandbox here (the reason names the fix)."""
    from course_utils.grading.runner import sandbox
    from course_utils.grading.runner.limits import DEFAULTS

    return sandbox.problem(DEFAULTS.max_procs)


@functools.cache
def container() -> str | None:
    """Why the course's image cannot run here with Charliecloud (the reason names the fix)."""
    if not shutil.which("ch-run"):
        return "Charliecloud is not installed (apt-get install charliecloud-runtime)"
    if not IMAGE.is_file():
        return f"no image at {IMAGE}: build it with `make container` (as root, with mmdebstrap)"
    return None


CHECKS = {
    "gpu": gpu,
    "slurm": slurm,
    "browser": browser,
    "cpp": cpp,
    "ccache": ccache,
    "shellcheck": shellcheck,
    "bwrap": bwrap,
    "container": container,
}


def problem(marker: str) -> str | None:
    return CHECKS[marker]()
