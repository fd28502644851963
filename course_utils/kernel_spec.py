"""The course environment as a Jupyter kernel on a centre's JupyterHub (taught in lesson 00).

A hub starts a kernel from its kernel.json alone, not from your login shell, so nothing that
`module load` set reaches it: a venv built on a module's Python or PyTorch then fails to find
the module's libraries (LD_LIBRARY_PATH: CUDA, cuDNN, MPI) in the kernel while it works in a
terminal. kernel.json may carry an `env` of its own; `install` registers the kernel as
`python -m ipykernel install` does and writes the module environment of the shell it runs in
into that `env`:

    module load python/3.11 cuda/12.6 && source ~/venvs/course/bin/activate
    course kernel                       # the same as: python -m course_utils.cli kernel

Run it again after changing modules. `kernel_spec` is the plain rule (tested with an injected
environment); `install` writes it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from course_utils.files import atomic_write_text

NAME, DISPLAY_NAME = "course", "PyTorch on HPC (course)"
# What `module load` sets that a kernel needs to find the module's software.
KEEP = (
    "PATH",
    "LD_LIBRARY_PATH",
    "LIBRARY_PATH",
    "CPATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "MODULEPATH",
    "LOADEDMODULES",
    "PYTHONPATH",
)


def kernel_env(environ: Mapping[str, str], keep: Sequence[str] = KEEP) -> dict[str, str]:
    """The variables of `keep` that are set in `environ`: what the kernel must carry."""
    return {name: environ[name] for name in keep if environ.get(name)}


def kernel_spec(
    python: str, environ: Mapping[str, str], display_name: str = DISPLAY_NAME, keep=KEEP
) -> dict:
    """kernel.json of a kernel that runs `python` with the module environment of `environ`."""
    return {
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name,
        "language": "python",
        "env": kernel_env(environ, keep),
        "metadata": {"debugger": True},
    }


def install(
    name: str = NAME,
    display_name: str = DISPLAY_NAME,
    prefix: str | None = None,
    environ: Mapping[str, str] | None = None,
    keep: Sequence[str] = KEEP,
) -> Path:
    """Register this Python as kernel `name` (in ~/.local/share/jupyter, or under `prefix`) with
    the module environment of `environ` (default: this process's) in its kernel.json."""
    from ipykernel.kernelspec import install as ipykernel_install

    folder = Path(
        ipykernel_install(
            kernel_name=name, display_name=display_name, user=prefix is None, prefix=prefix
        )
    )
    environ = os.environ if environ is None else environ
    spec = kernel_spec(sys.executable, environ, display_name, keep)
    atomic_write_text(folder / "kernel.json", json.dumps(spec, indent=1) + "\n")
    return folder
