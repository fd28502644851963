"""What a job pays to import PyTorch before it computes (lesson 00, exercise 00.4).

Every job, every rank and every restart starts a fresh Python that imports torch: hundreds of
files and libraries read from wherever the environment lives. On a cluster that is often a shared
filesystem, read by many nodes at once; a node that has read them before serves them from its page
cache. These helpers measure both cases in fresh processes, on this machine:
- cold: after asking the kernel to drop the package's file pages from its cache
  (`os.posix_fadvise(..., POSIX_FADV_DONTNEED)`, which needs no privileges; pages that a running
  process has mapped, such as this kernel's own libtorch, stay);
- warm: the same import again, its files now in memory.
Each sample is the child's own clock around `import torch`, printed by the child, never a number
typed in. `save`/`load` keep the records as JSON (`files.atomic_write_text`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import time
from pathlib import Path

from course_utils import files, processes

# The child times its own import: process start-up is the same for every case and left out.
CHILD = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
FRESH_IMPORT_S = 0.05  # below this, the module was already imported: not a fresh process
TIMEOUT_S = 120.0


def package_dir(module: str = "torch") -> Path:
    """The folder a fresh Python would import `module` from."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"module {module!r} is not an installed package; install it first")
    return Path(next(iter(spec.submodule_search_locations)))


def filesystem(path: str | os.PathLike) -> str:
    """The type of the filesystem `path` lives on (ext4, nfs, lustre, gpfs, tmpfs...)."""
    best, kind = "", "unknown"
    target = os.path.realpath(path)
    if not os.path.exists("/proc/mounts"):  # not Linux: no mount table to read
        return kind
    with open("/proc/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            parts = line.split()
            if len(parts) > 2 and target.startswith(parts[1]) and len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    return kind


def evict(root: str | os.PathLike) -> int:
    """Ask the kernel to drop the cached pages of every file under `root`; return their bytes.

    Returns 0 where the system has no posix_fadvise (macOS): nothing was dropped there."""
    if not hasattr(os, "posix_fadvise"):
        return 0
    total = 0
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:  # a broken link, a file we may not read: nothing cached of ours
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                total += os.fstat(fd).st_size
            finally:
                os.close(fd)
    return total


def import_seconds(module: str = "torch", python: str = sys.executable) -> dict:
    """Import `module` in a fresh `python`; return the child's seconds and its process id."""
    code = CHILD.format(module=module) + "; import os; print(os.getpid())"
    done = processes.run([python, "-c", code], timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"`{python} -c 'import {module}'` failed: {done.stderr.strip()[-500:]}")
    seconds, pid = done.stdout.split()[-2:]
    return {"seconds": float(seconds), "pid": int(pid)}


def sample(state: str, module: str = "torch", python: str = sys.executable) -> dict:
    """One measured import, `state` "cold" (the package's pages dropped first) or "warm"."""
    if state not in ("cold", "warm"):
        raise ValueError(f"state {state!r} must be 'cold' or 'warm'")
    evicted = evict(package_dir(module)) if state == "cold" else 0
    return {"state": state, "evicted_bytes": evicted, **import_seconds(module, python)}


def records(samples: list[dict], module: str = "torch", python: str = sys.executable) -> dict:
    """The samples with what they were measured on: interpreter, package folder, filesystem."""
    where = package_dir(module)
    return {
        "module": module,
        "python": python,
        "package_dir": str(where),
        "filesystem": filesystem(where),
        "host": socket.gethostname(),
        "measured_at": time.time(),
        "samples": samples,
    }


def save(measured: dict, path: str | os.PathLike) -> Path:
    return files.atomic_write_text(path, json.dumps(measured, indent=1) + "\n")


def load(path: str | os.PathLike) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def measure(path: str | os.PathLike, warm: int = 2, module: str = "torch") -> dict:
    """The reference run of exercise 00.4: one cold import, then `warm` warm ones, saved."""
    samples = [sample("cold", module)] + [sample("warm", module) for _ in range(warm)]
    measured = records(samples, module)
    save(measured, path)
    return measured


def summary(measured: dict) -> dict:
    """Cold and warm medians (seconds) from the records."""
    by_state = {"cold": [], "warm": []}
    for s in measured["samples"]:
        by_state[s["state"]].append(s["seconds"])
    return {state: sorted(v)[len(v) // 2] for state, v in by_state.items() if v}
