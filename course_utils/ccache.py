"""The compiler cache of the course's C++ builds (lesson 07): ccache, where it is installed.

cpp.configure_command asks `launcher_here` for CMake's compiler launcher, so every build the
course configures (its programs, the lesson's project, a learner's `course cpp build`) compiles
through ccache, whose objects live in build/ccache. Without ccache the builds compile as before.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from course_utils.paths import REPO_ROOT, build_root


def compiler_cache() -> Path:
    """Where the course's builds keep ccache's compiled objects: build/ccache."""
    return build_root() / "ccache"


def compiler_launcher(
    ccache: str | None, env: str | None, cache: Path, writable: bool
) -> list[str]:
    """The cmake argument that compiles through ccache, or nothing where it cannot.

    ccache (`ccache` and `env` the paths of those programs, or None where they are missing)
    keeps its objects in `cache` when that folder can be written (`writable`; a grading
    sandbox shows the build folder read-only). Paths under the checkout are hashed relative to
    the compile's folder (CCACHE_BASEDIR) and the folder itself not at all (CCACHE_NOHASHDIR),
    so two projects whose build folders lie equally deep in the checkout share objects: what
    `make programs` compiled in build/runs/07/example is found again when lesson 07 compiles the
    same example in solutions/runs/07/example or notebooks/runs/07/example.
    """
    if not (ccache and env and writable):
        return []
    settings = [f"CCACHE_DIR={cache}", f"CCACHE_BASEDIR={REPO_ROOT}", "CCACHE_NOHASHDIR=1"]
    return [f"-DCMAKE_CXX_COMPILER_LAUNCHER={';'.join([env, *settings, ccache])}"]


def launcher_here() -> list[str]:
    """`compiler_launcher` for this machine: ccache and env from PATH, the cache in build/."""
    cache = compiler_cache()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # a read-only build folder: compile without the cache
    writable = cache.is_dir() and os.access(cache, os.W_OK)
    return compiler_launcher(shutil.which("ccache"), shutil.which("env"), cache, writable)
