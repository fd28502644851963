"""Running the course inside its container image: one template for the two runtimes HPC
centres offer, Charliecloud (`ch-run`, this course's CI) and Apptainer (`apptainer exec --nv`),
and which of them runs a given image (taught in lesson 00, "A container image").

    containers.in_image("charliecloud", "course.sqfs", ["course", "doctor"], cd=containers.WORK,
                        binds=[("/home/ann/work", containers.WORK)])
    -> ch-run --home --bind=/home/ann/work:/mnt/1 --cd=/mnt/1 course.sqfs -- course doctor

`course kernel --container IMAGE` writes a kernel from this template, and `slurm/config.sh`
(COURSE_IMAGE) starts each task of a job the same way; a test holds the two to the same words.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Runtime:
    """The words of one runtime: the program, how it binds a host folder at a path inside the
    image and starts in a folder there, and what separates the image from the command."""

    name: str
    program: tuple[str, ...]
    bind: str  # formatted with host= and guest=
    cd: str  # formatted with guest=
    before_command: tuple[str, ...]


RUNTIMES = {
    # --home: the user's home inside, writable (caches, IPython, matplotlib), as Apptainer binds
    # it by default. ch-run binds only onto paths the image has: /mnt/0-9 are there for that.
    # GPUs: Charliecloud 0.31 has no run-time switch; `ch-fromhost --nvidia` copies the host
    # driver's libraries into a directory image once.
    "charliecloud": Runtime(
        "charliecloud", ("ch-run", "--home"), "--bind={host}:{guest}", "--cd={guest}", ("--",)
    ),
    # --nv binds the node's NVIDIA driver libraries and devices in: an image carries CUDA's
    # runtime libraries, never the driver, which must match the node's kernel module.
    "apptainer": Runtime(
        "apptainer", ("apptainer", "exec", "--nv"), "--bind={host}:{guest}", "--pwd={guest}", ()
    ),
}
# Where the folder you work in (a job's submission folder, a notebook's folder) appears inside
# the image, and where a kernel's connection file does: Charliecloud's own mount points.
WORK = "/mnt/1"
KERNEL_FILES = "/mnt/0"
# Only Apptainer (and SingularityCE) run a SIF file; ch-run takes a directory or a SquashFS file.
APPTAINER_ONLY = (".sif",)


def in_image(
    runtime: str,
    image: str,
    command: Sequence[str],
    binds: Iterable[tuple[str, str]] = (),
    cd: str | None = None,
) -> list[str]:
    """The command line that runs `command` inside `image` with `runtime`, each (host, guest)
    folder of `binds` bound, starting in `cd` (a path inside the image)."""
    words = runtime_words(runtime)
    argv = list(words.program)
    argv += [words.bind.format(host=host, guest=guest) for host, guest in binds]
    if cd:
        argv.append(words.cd.format(guest=cd))
    return [*argv, image, *words.before_command, *command]


def runtime_words(runtime: str) -> Runtime:
    if runtime not in RUNTIMES:
        raise ValueError(
            f"container runtime {runtime!r} is not one the course knows: use one of "
            f"{', '.join(RUNTIMES)} (--runtime), or leave it out to choose by the image"
        )
    return RUNTIMES[runtime]


def choose_runtime(image: str, installed: Callable[[str], str | None] = shutil.which) -> str:
    """The runtime that runs `image` here: Apptainer for a SIF file; else Charliecloud where
    ch-run is installed, else Apptainer (which runs directories and SquashFS files too)."""
    if image.endswith(APPTAINER_ONLY):
        if installed("apptainer"):
            return "apptainer"
        raise ValueError(
            f"{image} is a SIF file, which only Apptainer runs, and apptainer is not on PATH: "
            "load it first (`module load apptainer` at most centres) or give the image as a "
            "SquashFS file or a directory for Charliecloud"
        )
    for runtime in ("charliecloud", "apptainer"):
        if installed(RUNTIMES[runtime].program[0]):
            return runtime
    raise ValueError(
        f"no container runtime to run {image}: neither ch-run nor apptainer is on PATH; load "
        "your centre's module (`module avail apptainer charliecloud`) or install Charliecloud "
        "(Debian: apt-get install charliecloud-runtime)"
    )
