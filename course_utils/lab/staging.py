"""Staging a data set onto node-local disk, once per node, inside the job. Taught in lesson 10.

A job whose ranks read many small files from the shared file system pays for every open: on a
cluster's parallel file system each one is a round trip to its metadata server, shared with
every other job. Staging reads one archive from the shared folder once per node, unpacks it on
the node's own disk, and the ranks read that copy.

    base = staging.local_base(os.environ)       # where: SLURM_TMPDIR, else TMPDIR, else /tmp
    copy = staging.stage(archive, os.environ)   # the first rank of a node unpacks, the rest wait

`$SLURM_TMPDIR` is a convention of some centres (a per-job folder on the node's disk, removed at
the job's end), not something Slurm itself sets; `$TMPDIR` is the general one. Torch-free on
purpose: the staging program (course_utils.jobs.lab_staging) starts in a fraction of a second.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import statistics
import tarfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from course_utils.batch import JOB_VARIABLE, NODE_VARIABLE
from course_utils.files import atomic_write, atomic_write_text

BASE_VARIABLES = ("SLURM_TMPDIR", "TMPDIR")  # in the order they are tried
FALLBACK = "/tmp"
MARKER = ".staged"  # written last: a copy without it is incomplete
# The lab's data set on the shared folder (small_files writes it): here, so that the staging
# program reads these names without importing small_files, which imports torch.
IMAGES = "images"  # the folder of small files
ARCHIVE = "images.tar"  # the same folder as one archive


@dataclass(frozen=True)
class Base:
    """Where node-local files go, and which rule chose it."""

    path: Path
    source: str  # "SLURM_TMPDIR", "TMPDIR" or "/tmp"

    def __str__(self) -> str:
        if self.source == FALLBACK:
            return f"{self.path} (neither SLURM_TMPDIR nor TMPDIR is set)"
        return f"{self.path} (from ${self.source})"


def local_base(environ: Mapping[str, str]) -> Base:
    """The node-local folder: $SLURM_TMPDIR where the site sets it, else $TMPDIR, else /tmp."""
    for name in BASE_VARIABLES:
        value = environ.get(name)
        if not value:
            continue
        if not os.path.isabs(value):
            raise ValueError(
                f"{name}={value!r} is not an absolute path; node-local disk must be named from "
                f"the root (e.g. /localscratch/job): fix or unset {name}"
            )
        return Base(Path(value), name)
    return Base(Path(FALLBACK), FALLBACK)


def node_name(environ: Mapping[str, str]) -> str:
    """This node's name: the local emulation's, else Slurm's (SLURMD_NODENAME), else the host's."""
    return environ.get(NODE_VARIABLE) or environ.get("SLURMD_NODENAME") or socket.gethostname()


def stage_folder(environ: Mapping[str, str]) -> Path:
    """<base>/course-lab-<job>/<node>: one folder per job and node.

    The node's name is in the path because the course's CI cluster runs its two nodes on one
    machine, which share one /tmp; on a real cluster each node has its own disk anyway."""
    job = environ.get("SLURM_JOB_ID") or environ.get(JOB_VARIABLE) or "nojob"
    return local_base(environ).path / f"course-lab-{job}" / node_name(environ)


@dataclass(frozen=True)
class Staged:
    """The outcome of `stage` in one rank: where the copy is and whether this rank made it."""

    path: Path  # the unpacked data set on node-local disk
    node: str
    base: Base
    copied: bool  # True in the one rank per node that unpacked the archive
    seconds: float  # this rank's time in `stage`: copying, or waiting for the rank that copied
    files: int
    nbytes: int

    def as_dict(self) -> dict:
        return {
            "path": str(self.path),
            "node": self.node,
            "base": str(self.base.path),
            "base_from": self.base.source,
            "copied": self.copied,
            "seconds": self.seconds,
            "files": self.files,
            "bytes": self.nbytes,
        }


def _lock(path: Path, timeout: float):
    """An exclusive flock on `path` (node-local, where flock is reliable; on NFS or Lustre it
    may not be), waiting at most `timeout` seconds."""
    handle = open(path, "a")  # noqa: SIM115  (closed by the caller's `with`)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                raise TimeoutError(
                    f"another rank has held {path} for more than {timeout:g} s while staging; "
                    "is the archive very large, or did a rank hang while unpacking?"
                ) from None
            time.sleep(0.02)


def _unpack(archive: Path, into: Path) -> None:
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.12, 3.11.4+: refuse paths out of `into`
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)  # noqa: S202  (our own archive)


def _count(folder: Path) -> tuple[int, int]:
    sizes = [p.stat().st_size for p in folder.rglob("*") if p.is_file() and p.name != MARKER]
    return len(sizes), sum(sizes)


def stage(
    archive: str | os.PathLike, environ: Mapping[str, str] | None = None, timeout: float = 300
) -> Staged:
    """Unpack `archive` into this node's stage folder once; every rank returns that folder.

    Every rank of the node calls it. The first to take the node's lock unpacks into a
    temporary folder, writes the marker and renames it into place; the others wait for the
    lock, find the marker and read the copy. A rank that died halfway left no marker: the
    next one starts again from a clean folder.
    """
    environ = os.environ if environ is None else environ
    archive = Path(archive)
    if not archive.is_file():
        raise ValueError(f"no archive at {archive}: write it first (lab_data.write_dataset)")
    target = stage_folder(environ)
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with _lock(_lock_file(target), timeout):
        copied = not (target / MARKER).exists()
        if copied:
            partial = target.with_name(f"{target.name}.partial")
            for leftover in (partial, target):
                shutil.rmtree(leftover, ignore_errors=True)
            _unpack(archive, partial)
            atomic_write_text(partial / MARKER, f"unpacked from {archive}\n")
            os.replace(partial, target)
    files, nbytes = _count(target)
    return Staged(
        target,
        node_name(environ),
        local_base(environ),
        copied,
        time.perf_counter() - start,
        files,
        nbytes,
    )


def _lock_file(target: Path) -> Path:
    return target.parent / f".{target.name}.lock"


def release(staged: Staged, ranks_on_node: int, timeout: float = 300) -> bool:
    """Leave the node's copy once this rank is done with it; the last of the node's
    `ranks_on_node` ranks to leave removes it. True in the rank that removed it."""
    target = staged.path
    tally = target.parent / f".{target.name}.left"
    with _lock(_lock_file(target), timeout):
        left = int(tally.read_text()) + 1 if tally.exists() else 1
        if left < ranks_on_node:
            atomic_write_text(tally, str(left))
            return False
        shutil.rmtree(target, ignore_errors=True)
        tally.unlink(missing_ok=True)
        _lock_file(target).unlink(missing_ok=True)  # held by this rank: no one waits on it
    try:
        target.parent.rmdir()  # the job's folder, once no node's copy is left in it
    except OSError:
        pass
    return True


def make_archive(folder: str | os.PathLike, archive: str | os.PathLike) -> Path:
    """One uncompressed tar of `folder` (its files are already compact); written atomically."""
    folder, archive = Path(folder), Path(archive)

    def write(f) -> None:
        with tarfile.TarFile(fileobj=f, mode="w") as tar:
            tar.add(folder, arcname=folder.name)

    return atomic_write(archive, write)


@dataclass(frozen=True)
class Reading:
    """Reading a data set once: how many files and bytes, and the median seconds."""

    files: int
    nbytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / self.seconds / 1e6


def _median_seconds(read, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def read_files(folder: str | os.PathLike, repeats: int = 3) -> Reading:
    """Open and read every file under `folder`, as a loader of small files does each epoch.

    Timed with the host clock, median of `repeats` (I/O, no device work to synchronize; after
    the first read the files come from the page cache, as a second epoch's would)."""
    paths = sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.name != MARKER)

    def read():
        return sum(len(p.read_bytes()) for p in paths)

    nbytes = read()
    return Reading(len(paths), nbytes, _median_seconds(read, repeats))


def read_archive(archive: str | os.PathLike, repeats: int = 3, chunk: int = 4 << 20) -> Reading:
    """Read one archive from start to end, in `chunk`-byte pieces: one open, sequential."""
    archive = Path(archive)

    def read():
        total = 0
        with open(archive, "rb") as f:
            while block := f.read(chunk):
                total += len(block)
        return total

    nbytes = read()
    return Reading(1, nbytes, _median_seconds(read, repeats))


def staging_saving(
    shared_read: float, local_read: float, stage_seconds: float, reads: int
) -> float:
    """Seconds a node saves by staging: `reads` reads of the data set (epochs x ranks on the
    node) from local disk instead of the shared folder, minus the time the staging took.
    Negative when staging costs more than it saves."""
    if reads < 0 or min(shared_read, local_read, stage_seconds) < 0:
        raise ValueError(
            f"reads={reads} and the seconds ({shared_read}, {local_read}, {stage_seconds}) "
            "must not be negative"
        )
    return reads * (shared_read - local_read) - stage_seconds


def load_results(folder: str | os.PathLike) -> list[dict]:
    """What each rank of the staging program (course_utils.jobs.lab_staging) wrote, by rank."""
    import json

    found = [json.loads(p.read_text()) for p in Path(folder).glob("rank*.json")]
    if not found:
        raise ValueError(f"no rank*.json in {folder}: run the staging step first")
    return sorted(found, key=lambda r: r["rank"])


def copies_per_node(results: list[dict]) -> dict[str, int]:
    """{node: how many of its ranks unpacked the archive}: 1 everywhere when staging worked."""
    copies: dict[str, int] = {}
    for r in results:
        copies[r["node"]] = copies.get(r["node"], 0) + int(r["copied"])
    return dict(sorted(copies.items()))


def readings_table(results: list[dict]) -> str:
    """The four reads each node's first rank timed: files, MB, ms and MB/s."""
    from course_utils.tables import text_table

    rows = []
    for r in results:
        for what, m in r.get("readings", {}).items():
            rate = m["bytes"] / m["seconds"] / 1e6
            ms = round(m["seconds"] * 1e3, 1)
            rows.append([r["node"], what, m["files"], round(m["bytes"] / 1e6, 1), ms, round(rate)])
    return text_table(["node", "read", "files", "MB", "ms", "MB/s"], rows)
