"""/dev/shm and the DataLoader: the "Bus error" where shared memory is small (lesson 09).

Every batch a DataLoader worker makes travels to the main process as a tensor in shared memory:
a file in /dev/shm. Docker gives a container 64 MiB there unless told otherwise (--shm-size), and
a loader keeps several batches on order. PyTorch up to 2.9 sized those files with ftruncate and
crashed at the first write past the end of the space: the worker dies of SIGBUS and the loader
says "killed by signal: Bus error". PyTorch 2.10 and newer reserve the space first
(posix_fallocate) and raise "unable to allocate shared memory(shm) ... No space left on device".

`provoke` runs course_utils.jobs.loader_memory in a private /dev/shm of a few hundred KiB (made
with bubblewrap, or `unshare -m` as root, whichever is here: the route is said) and returns what
the loader said; `loader_shm_bytes` is the shared memory a loader needs, to compare with
`shm_free`. `record` keeps runs under other PyTorch releases (course_utils/reference/).
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from course_utils import paths, processes, reference
from course_utils.failing.job_memory import IMAGE_BYTES

PROGRAM = "course_utils.jobs.loader_memory"
RECORD = "small_devshm"  # course_utils/reference/small_devshm.json


def loader_shm_bytes(batch_bytes: int, workers: int, prefetch_factor: int = 2) -> int:
    """Shared memory (/dev/shm) a DataLoader's batches can occupy at once: the loader keeps
    `prefetch_factor` batches per worker on order, each one a file in /dev/shm from when its
    worker has made it until the main process lets it go, plus the batch the step is using."""
    if workers < 0 or prefetch_factor < 1 or batch_bytes < 0:
        raise ValueError(
            f"workers={workers}, prefetch_factor={prefetch_factor}, batch_bytes={batch_bytes}: "
            "need workers >= 0, prefetch_factor >= 1, batch_bytes >= 0"
        )
    return batch_bytes * (prefetch_factor * workers + 1) if workers else 0


def shm_free(path: str = "/dev/shm") -> int | None:
    """Free bytes in /dev/shm (None where there is none: macOS, Windows)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def small_shm_prefix(size: int) -> tuple[list[str] | None, str]:
    """The command prefix that runs a command with a private /dev/shm of `size` bytes, and the
    route in words: bubblewrap where installed, else `unshare -m` as root, else (None, why)."""
    if shutil.which("bwrap"):
        prefix = [
            "bwrap",
            "--dev-bind",
            "/",
            "/",
            "--size",
            str(size),
            "--tmpfs",
            "/dev/shm",
            "--die-with-parent",
            "--",
        ]
        return prefix, f"bubblewrap: a private tmpfs of {size // 1024} KiB on /dev/shm"
    if shutil.which("unshare") and os.geteuid() == 0:
        mount = f'mount -t tmpfs -o size={size} tmpfs /dev/shm && exec "$@"'
        prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh"]
        return prefix, f"unshare -m: a private tmpfs of {size // 1024} KiB on /dev/shm"
    return None, "no bubblewrap, and unshare -m needs root: no private /dev/shm can be made here"


@dataclass(frozen=True)
class ShmRun:
    batch_size: int
    needs: int  # bytes of /dev/shm the loader's batches can occupy (loader_shm_bytes)
    returncode: int | None
    output: str

    @property
    def error(self) -> str | None:
        return shm_error(self.output)


def shm_error(output: str) -> str | None:
    """The line that names the shared-memory problem, in either PyTorch's words."""
    m = re.search(
        r"^.*(?:unable to allocate shared memory|killed by signal: Bus error|"
        r"Unexpected bus error).*$",
        output,
        re.M,
    )
    return m[0].strip() if m else None


def provoke(
    images, size: int, batch_sizes=(512, 64), python: str = sys.executable, timeout: float = 90
) -> tuple[str, list[ShmRun]]:
    """Run the loader (1 worker, mapped images) in a private /dev/shm of `size` bytes, once per
    batch size, side by side. Returns (route, runs); raises RuntimeError where no private
    /dev/shm can be made, or where the sandbox tool itself failed (its message)."""
    from concurrent.futures import ThreadPoolExecutor

    prefix, route = small_shm_prefix(size)
    if prefix is None:
        raise RuntimeError(route)

    def one(batch_size: int) -> ShmRun:
        command = [
            *prefix,
            python,
            "-m",
            PROGRAM,
            "--data",
            str(images),
            "--open",
            "mmap",
            "--workers",
            "1",
            "--batch-size",
            str(batch_size),
            "--batches",
            "2",
        ]
        env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT), "OMP_NUM_THREADS": "1"}
        done = processes.run(command, timeout=timeout, env=env, merge=True)
        needs = loader_shm_bytes(batch_size * IMAGE_BYTES, workers=1)
        return ShmRun(batch_size, needs, done.returncode, done.stdout)

    with ThreadPoolExecutor(max_workers=len(batch_sizes)) as pool:
        runs = list(pool.map(one, batch_sizes))
    if not any(r.error or "finished" in r.output for r in runs):
        raise RuntimeError(f"{route} did not run the loader: {runs[0].output[-500:]}")
    return route, runs


# --- Runs under other PyTorch releases ---------------------------------------------------------


def record(images, pythons: list[str], size: int = 2**20) -> Path:
    """Provoke it under each interpreter of `pythons` (a venv of another PyTorch release each) and
    write the outputs, labelled, paths as a learner reads them, to course_utils/reference/."""
    runs = []
    for python in pythons:
        route, found = provoke(images, size, python=python)
        prefix = Path(python).parent.parent  # the venv of that interpreter
        torch_version = processes.run(
            [python, "-c", "import torch; print(torch.__version__)"], timeout=60
        ).stdout.strip()
        for run in found:
            output = paths.as_learner_sees(run.output.replace(str(prefix), ".venv"))
            output = output.replace(str(images), "images.npy")
            runs.append(
                {
                    "torch": torch_version,
                    "route": route,
                    "batch_size": run.batch_size,
                    "needs": run.needs,
                    "returncode": run.returncode,
                    "output": output,
                }
            )
    label = {
        "date": datetime.date.today().isoformat(),
        "commit": paths.commit(),
        "machine": "the course's build machine (Debian 12, x86_64, 2 cores)",
    }
    return reference.save({"label": label, "runs": runs}, paths.REFERENCE_DIR / f"{RECORD}.json")


def recorded() -> dict:
    data = reference.load(RECORD)
    if data is None:
        raise FileNotFoundError(f"no recorded run course_utils/reference/{RECORD}.json")
    return data
