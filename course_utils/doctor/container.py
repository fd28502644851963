"""`course doctor`'s container rows: whether this process runs inside a container image, which
runtime started it and where the image's Python keeps its packages, and whether the node's GPU
driver reached inside (taught in lesson 00, "A container image").

Each runtime leaves its own mark in the processes it starts; `detect` reads the marks and
`container_findings` decides the rows: both are pure functions of the answers (tested with
injected ones). `container` asks this process.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from course_utils.doctor.findings import INFO, OK, WARN, Finding

# The marks, in the order they are read: (runtime, "env" or "file", the variable or the file).
# Apptainer sets APPTAINER_CONTAINER (and, for old scripts, SINGULARITY_CONTAINER) to the image;
# SingularityCE sets only the latter. Charliecloud's ch-run sets CH_RUNNING ("Weird Al Yankovic").
# podman writes /run/.containerenv, Docker /.dockerenv; podman, LXC and systemd-nspawn also set
# `container` to their own name.
MARKS = (
    ("apptainer", "env", "APPTAINER_CONTAINER"),
    ("singularity", "env", "SINGULARITY_CONTAINER"),
    ("charliecloud", "env", "CH_RUNNING"),
    ("podman", "file", "/run/.containerenv"),
    ("docker", "file", "/.dockerenv"),
)


@dataclass(frozen=True)
class Container:
    runtime: str  # apptainer, singularity, charliecloud, podman, docker, or what `container` says
    evidence: str  # the mark that told, e.g. "CH_RUNNING is set"


def detect(environ: Mapping[str, str], exists: Callable[[str], bool]) -> Container | None:
    """The container this process runs in, from the runtimes' marks; None outside any."""
    for runtime, kind, mark in MARKS:
        if kind == "env" and environ.get(mark):
            return Container(runtime, f"{mark} is set")
        if kind == "file" and exists(mark):
            return Container(runtime, f"{mark} exists")
    if environ.get("container"):
        return Container(environ["container"], f"container={environ['container']}")
    return None


# What makes the node's GPUs usable inside an image: the runtime binds the host driver's own
# libraries in. They must match the kernel module the node runs, so no image can carry them.
GPU_FIX = (
    "run it with `apptainer exec --nv` (Charliecloud 0.31: `ch-fromhost --nvidia DIR` once on "
    "a directory image)"
)


def container_findings(
    found: Container | None, packages: str, driver: str | None, libcuda: bool
) -> list[Finding]:
    """The rows: the container (or none) with where its Python's packages live, and, inside one
    on a node with an NVIDIA driver, whether the driver's libraries came in with it.

    packages: the folder PyTorch was imported from; driver: the node's NVIDIA kernel driver
    (its /proc file, which a container sees) or None; libcuda: whether libcuda.so.1 loads here."""
    if found is None:
        return [Finding("container", "none: no container runtime's mark here", INFO)]
    rows = [
        Finding(
            "container",
            f"{found.runtime} ({found.evidence}); Python {sys.executable}, packages in {packages}",
            INFO,
        )
    ]
    if driver is None:
        return rows
    if libcuda:
        rows.append(Finding("container gpu", f"driver {driver}: its libraries are inside", OK))
    else:
        rows.append(
            Finding(
                "container gpu",
                f"the node has NVIDIA driver {driver}, but its libraries (libcuda) are not inside",
                WARN,
                f"PyTorch will see no GPU: {GPU_FIX}",
            )
        )
    return rows


def libcuda_loads() -> bool:
    """Whether the CUDA driver's library loads in this process (without starting CUDA)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def container() -> list[Finding]:
    import torch

    from course_utils.doctor.gpu import nvidia_driver

    found = detect(os.environ, os.path.exists)
    packages = str(Path(torch.__file__).parent.parent)
    driver = nvidia_driver() if found else None
    return container_findings(found, packages, driver, libcuda_loads() if driver else False)
