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

A kernel may also run inside the course's container image (lesson 00, "A container image"):

    course kernel --container ~/course.sqfs          # ch-run here; a .sif file: apptainer exec --nv

`container_kernel_spec` writes its kernel.json from the runtimes' one template
(`containers.in_image`); `install_container` registers it.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from course_utils import containers
from course_utils.files import atomic_write_text

NAME, DISPLAY_NAME = "course", "PyTorch on HPC (course)"
CONTAINER_NAME, CONTAINER_DISPLAY_NAME = "course-container", "PyTorch on HPC (course, container)"
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


def container_kernel_spec(
    image: str, runtime: str, display_name: str = CONTAINER_DISPLAY_NAME
) -> dict:
    """kernel.json of a kernel whose process runs inside `image` with `runtime`.

    Jupyter names the connection file only when it starts the kernel ({connection_file}), and
    starts it in the notebook's folder: a shell binds that file's folder at KERNEL_FILES and the
    notebook's folder at WORK, starts there, and execs the runtime (ch-run needs $USER set)."""
    kernel = ["python3", "-m", "ipykernel_launcher", "-f", f"{containers.KERNEL_FILES}/<file>"]
    binds = [("<folder>", containers.KERNEL_FILES), ("<cwd>", containers.WORK)]
    argv = containers.in_image(runtime, image, kernel, binds, cd=containers.WORK)
    script = " ".join(shlex.quote(word) for word in argv)
    for placeholder, at_start in _AT_START.items():  # each inside a single-quoted word
        script = script.replace(placeholder, f"'{at_start}'")
    return {
        "argv": [
            "/bin/sh",
            "-c",
            f'export USER="${{USER:-$(id -un)}}"; exec {script}',
            CONTAINER_NAME,
            "{connection_file}",
        ],
        "display_name": display_name,
        "language": "python",
        # Jupyter's interrupt signal would reach the runtime outside; the kernel inside
        # interrupts itself when asked by message.
        "interrupt_mode": "message",
        "env": {},  # the host's module settings name the host's folders, not the image's
        "metadata": {"debugger": True},
    }


# What the shell fills in at the kernel's start: the connection file's folder and name ($1),
# and the folder Jupyter started the kernel in.
_AT_START = {"<folder>": '"${1%/*}"', "<file>": '"${1##*/}"', "<cwd>": '"$PWD"'}


def install(
    name: str = NAME,
    display_name: str = DISPLAY_NAME,
    prefix: str | None = None,
    environ: Mapping[str, str] | None = None,
    keep: Sequence[str] = KEEP,
) -> Path:
    """Register this Python as kernel `name` (in ~/.local/share/jupyter, or under `prefix`) with
    the module environment of `environ` (default: this process's) in its kernel.json."""
    environ = os.environ if environ is None else environ
    return _register(
        name, display_name, prefix, kernel_spec(sys.executable, environ, display_name, keep)
    )


def install_container(
    image: str,
    runtime: str | None = None,
    name: str = CONTAINER_NAME,
    display_name: str = CONTAINER_DISPLAY_NAME,
    prefix: str | None = None,
) -> tuple[Path, str]:
    """Register kernel `name` running inside `image` (the runtime: `runtime`, else the one
    `containers.choose_runtime` picks here). Returns its folder and the runtime."""
    path = Path(image).expanduser().resolve()
    if not path.exists():
        raise ValueError(
            f"no container image at {image}: build the course's with `make container` "
            "(build/container/course.sqfs), or give the path of a .sqfs, .sif or image folder"
        )
    runtime = runtime or containers.choose_runtime(str(path))
    spec = container_kernel_spec(str(path), runtime, display_name)
    return _register(name, display_name, prefix, spec), runtime


def _register(name: str, display_name: str, prefix: str | None, spec: dict) -> Path:
    """ipykernel's registration (in ~/.local/share/jupyter, or under `prefix`), then `spec`."""
    from ipykernel.kernelspec import install as ipykernel_install

    folder = Path(
        ipykernel_install(
            kernel_name=name, display_name=display_name, user=prefix is None, prefix=prefix
        )
    )
    atomic_write_text(folder / "kernel.json", json.dumps(spec, indent=1) + "\n")
    return folder
