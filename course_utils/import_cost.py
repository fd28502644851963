"""What a job pays to import PyTorch before it computes (lesson 00, exercise 00.4).

Every job, every rank and every restart starts a fresh Python that imports torch: hundreds of
files and libraries read from wherever the environment lives. On a cluster that is often a shared
filesystem, read by many nodes at once; a node that has read them before serves them from its page
cache. These helpers measure both cases in fresh processes, on this machine:
- cold: after asking the kernel to drop the cached pages of the package and of the NVIDIA
  libraries it loads (site-packages/nvidia: cuDNN, cuBLAS, NCCL) (`os.posix_fadvise(...,
  POSIX_FADV_DONTNEED)`, which needs no privileges). Pages that a running process has mapped
  stay: on a JupyterHub the kernel you run this from has imported torch, so much of it stays
  in memory and the "cold" import is not cold. What was really dropped, and what stayed, is
  counted page by page with mincore(2), not from the files' sizes;
- warm: the same import again, its files now in memory.
Each sample is the child's own clock around `import torch`, printed by the child, never a number
typed in. `save`/`load` keep the records as JSON (`files.atomic_write_text`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import json
import mmap
import os
import socket
import sys
import time
from pathlib import Path

from course_utils import files, processes

# The child times its own import (process start-up is the same for every case and left out),
# then says how many bytes it caused to be read from storage (Linux's /proc/self/io, read_bytes:
# what was not in the page cache), -1 where the system does not count them.
CHILD = """import time
t = time.perf_counter()
import {module}
seconds = time.perf_counter() - t
try:
    io = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
    read = int(io["read_bytes"])
except (OSError, KeyError, ValueError):
    read = -1
import os
print(seconds, read, os.getpid())
"""
FRESH_IMPORT_S = 0.05  # below this, the module was already imported: not a fresh process
TIMEOUT_S = 120.0


def package_dir(module: str = "torch") -> Path:
    """The folder a fresh Python would import `module` from."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"module {module!r} is not an installed package; install it first")
    return Path(next(iter(spec.submodule_search_locations)))


def package_dirs(module: str = "torch") -> list[Path]:
    """What a fresh import of `module` reads: its folder and, for torch, the NVIDIA libraries
    that libtorch_cuda loads (the `nvidia` folder beside it), where installed."""
    dirs = [package_dir(module)]
    spec = importlib.util.find_spec("nvidia") if module == "torch" else None
    if spec is not None and spec.submodule_search_locations:
        dirs += [Path(p) for p in spec.submodule_search_locations]
    return dirs


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


def _files(roots) -> list[str]:
    return [
        os.path.join(folder, name)
        for root in roots
        for folder, _, names in os.walk(root)
        for name in names
    ]


_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        size_t, void_p, int_ = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int
        libc.mmap.argtypes = [void_p, size_t, int_, int_, int_, ctypes.c_long]
        libc.munmap.argtypes = [void_p, size_t]
        libc.mincore.argtypes = [void_p, size_t, void_p]
        _LIBC = libc
    return _LIBC


def resident(path: str) -> int:
    """Bytes of `path` in the page cache now (mincore(2) on a read-only mapping of it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # a broken link, a file we may not read
        return 0
    try:
        size = os.fstat(fd).st_size
        if size == 0 or not hasattr(mmap, "MAP_SHARED"):
            return 0
        libc = _libc()
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            return 0
        try:
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vector = (ctypes.c_ubyte * pages)()
            if libc.mincore(address, size, vector) != 0:
                return 0
            return sum(b & 1 for b in bytes(vector)) * mmap.PAGESIZE
        finally:
            libc.munmap(address, size)
    finally:
        os.close(fd)


def resident_bytes(roots) -> int:
    """Bytes of every file under `roots` in the page cache now."""
    return sum(resident(path) for path in _files(roots))


def cache_hidden(roots) -> bool:
    """Whether this user cannot see which pages of these files are cached: since Linux 5.2
    mincore reports every page of a file the caller may not write as cached (no side channel on
    another user's files), so a course environment another user installed (a centre's, an
    instructor's) always looks cached to a learner."""
    first = next((path for path in _files(roots) if os.path.isfile(path)), None)
    return first is not None and not os.access(first, os.W_OK)


def evict(roots) -> dict:
    """Ask the kernel to drop the cached pages of every file under `roots`. Returns what was
    in memory before, what was dropped and what stayed (mapped by a running process), in bytes,
    counted page by page; `evicted_bytes` is None where this user cannot see the cache
    (`cache_hidden`: the cold import's reads from storage still tell). Nothing is dropped where
    the system has no posix_fadvise (macOS)."""
    before = resident_bytes(roots)
    if hasattr(os, "posix_fadvise"):
        for path in _files(roots):
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    after = resident_bytes(roots)
    dropped = max(0, before - after)  # pages read meanwhile by another process are not ours
    if cache_hidden(roots):
        dropped = None
    return {"resident_before": before, "evicted_bytes": dropped, "resident_after": after}


def import_seconds(module: str = "torch", python: str = sys.executable) -> dict:
    """Import `module` in a fresh `python`; return the child's seconds, the bytes it read from
    storage (-1: not counted here) and its process id."""
    done = processes.run([python, "-c", CHILD.format(module=module)], timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"`{python} -c 'import {module}'` failed: {done.stderr.strip()[-500:]}")
    seconds, read, pid = done.stdout.split()[-3:]
    return {"seconds": float(seconds), "read_bytes": int(read), "pid": int(pid)}


def sample(state: str, module: str = "torch", python: str = sys.executable) -> dict:
    """One measured import, `state` "cold" (the package's pages dropped first) or "warm"."""
    if state not in ("cold", "warm"):
        raise ValueError(f"state {state!r} must be 'cold' or 'warm'")
    cache = evict(package_dirs(module)) if state == "cold" else {}
    return {"state": state, "evicted_bytes": 0, **cache, **import_seconds(module, python)}


def records(samples: list[dict], module: str = "torch", python: str = sys.executable) -> dict:
    """The samples with what they were measured on: interpreter, package folder, filesystem."""
    where = package_dir(module)
    return {
        "module": module,
        "python": python,
        "package_dir": str(where),
        "package_dirs": [str(p) for p in package_dirs(module)],
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
