"""The compiler cache of the course's C++ builds (lesson 07): ccache, where it is installed.

Every build the course configures (its programs, the lesson's project, a learner's `course cpp
build`) compiles through ccache (`launcher_here`, CMake's compiler launcher), and so do the C++
compiles of AOTInductor inside `export.aoti_package` (`inductor_compiler`). The objects live in
build/ccache. Without ccache, or where build/ cannot be written, everything compiles as before.

Paths under the checkout are hashed relative to the compile's folder (CCACHE_BASEDIR) and the
folder itself not at all (CCACHE_NOHASHDIR), so two projects whose build folders lie equally deep
in the checkout share objects: what `make programs` compiled in build/runs/07/example is found
again when lesson 07 compiles the same example in solutions/runs/07/example or
notebooks/runs/07/example. AOTInductor writes a network's wrapper code to the same file in the
inductor cache whatever its weights, so the lesson's package compiles what `make programs`
compiled for the course's demo.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from course_utils.paths import REPO_ROOT, build_root


def compiler_cache() -> Path:
    """Where the course's builds keep ccache's compiled objects: build/ccache."""
    return build_root() / "ccache"


def settings(cache: Path) -> dict[str, str]:
    """ccache's settings for the course's compiles, as environment variables."""
    return {"CCACHE_DIR": str(cache), "CCACHE_BASEDIR": str(REPO_ROOT), "CCACHE_NOHASHDIR": "1"}


def compiler_launcher(ccache: str | None, env: str | None, cache: Path | None) -> list[str]:
    """The cmake argument that compiles through ccache, or nothing where it cannot: `ccache`
    and `env` are the paths of those programs, or None where they are missing; `cache` is the
    folder for the objects, None where none can be written (a grading sandbox shows build/
    read-only)."""
    if not (ccache and env and cache):
        return []
    assignments = [f"{name}={value}" for name, value in settings(cache).items()]
    return [f"-DCMAKE_CXX_COMPILER_LAUNCHER={';'.join([env, *assignments, ccache])}"]


def writable_cache() -> Path | None:
    """build/ccache, made where missing, or None where it cannot be written."""
    cache = compiler_cache()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return cache if os.access(cache, os.W_OK) else None


def launcher_here() -> list[str]:
    """`compiler_launcher` for this machine: ccache and env from PATH, the cache in build/."""
    return compiler_launcher(shutil.which("ccache"), shutil.which("env"), writable_cache())


def inductor_compiler(compiler: str) -> tuple[str, dict[str, str]] | None:
    """`compiler` (Inductor's, "g++" by default) through ccache: the path of a link to ccache
    named like it, and the environment that tells ccache which compiler it stands for. Inductor
    runs the compiler it is given and judges it by its name and `--version`, both kept; None
    where ccache cannot serve (not installed, build/ read-only, `compiler` not found)."""
    cache, ccache, real = writable_cache(), shutil.which("ccache"), shutil.which(compiler)
    if cache is None or ccache is None or real is None:
        return None
    link = cache / "bin" / Path(compiler).name
    if not (link.is_symlink() and os.readlink(link) == ccache):
        link.parent.mkdir(exist_ok=True)
        temporary = link.with_name(f".{link.name}.{os.getpid()}")
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(ccache)
        temporary.replace(link)  # two kernels making it at once each leave a whole link
    # Inductor compiles its wrapper against a precompiled header (-include): ccache uses one
    # only with these sloppiness settings (ccache's manual, "Precompiled headers").
    sloppiness = "pch_defines,time_macros,include_file_mtime,include_file_ctime"
    return str(link), settings(cache) | {"CCACHE_COMPILER": real, "CCACHE_SLOPPINESS": sloppiness}
