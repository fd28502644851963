"""Staging a data set onto node-local disk, once per node, inside the job. Taught in lesson 10.

A job whose ranks read many small files from the shared file system pays for every open: on a
cluster's parallel file system each one is a round trip to its metadata server, shared with
every other job. Staging reads one archive from the shared folder once per node, unpacks it on
the node's own disk, and the ranks read that copy.

    base = staging.local_base(os.environ)       # where: SLURM_TMPDIR, else TMPDIR, else /tmp
    copy = staging.stage(archive, os.environ)   # the first rank of a node unpacks, the rest wait
    staging.content_digest(copy.path / "images")   # what a copy holds, as one digest

`$SLURM_TMPDIR` is a convention of some centres (a per-job folder on the node's disk, removed at
the job's end), not something Slurm itself sets; `$TMPDIR` is the general one. Torch-free on
purpose: the staging program (course_utils.jobs.lab_staging) starts in a fraction of a second.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import sys
import tarfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from course_utils.files import atomic_write, atomic_write_text, exclusive_lock
from course_utils.ranks import node_name

BASE_VARIABLES = ("SLURM_TMPDIR", "TMPDIR")  # in the order they are tried
FALLBACK = "/tmp"
MARKER = ".staged"  # written last: a copy without it is incomplete
# The lab's data set on the shared folder (small_files writes it): here, so that the staging
# program reads these names without importing small_files, which imports torch.
IMAGES = "images"  # the folder of small files
ARCHIVE = "images.tar"  # the same folder as one archive
# What a rank that waited too long for the node's lock reads (files.exclusive_lock).
STAGING_HELD = "while staging; is the archive very large, or did a rank hang while unpacking?"


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


def job_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The job's variables as a rank of a Slurm job finds them: on Slurm, `environ` itself; on
    the local route, SLURM_JOB_ID, SLURMD_NODENAME, SLURM_PROCID and SLURM_LOCALID stand for the
    local run's job, emulated node and ranks (a learner's staging function reads those)."""
    from course_utils.batch import JOB_VARIABLE

    if environ.get("SLURM_JOB_ID"):
        return dict(environ)
    return {
        **environ,
        "SLURM_JOB_ID": environ.get(JOB_VARIABLE) or "nojob",
        "SLURMD_NODENAME": node_name(environ),
        "SLURM_PROCID": environ.get("RANK", "0"),
        "SLURM_LOCALID": environ.get("LOCAL_RANK", "0"),
    }


def stage_folder(environ: Mapping[str, str]) -> Path:
    """<base>/course-lab-<job>/<node>: one folder per job and node.

    The node's name is in the path because the course's CI cluster runs its two nodes on one
    machine, which share one /tmp; on a real cluster each node has its own disk anyway."""
    from course_utils.batch import JOB_VARIABLE

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


def unpack(archive: str | os.PathLike, into: str | os.PathLike) -> None:
    """Unpack `archive` into the folder `into`, refusing member paths that leave it."""
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
    with exclusive_lock(_lock_file(target), timeout, STAGING_HELD):
        copied = not (target / MARKER).exists()
        if copied:
            partial = target.with_name(f"{target.name}.partial")
            for leftover in (partial, target):
                shutil.rmtree(leftover, ignore_errors=True)
            unpack(archive, partial)
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
    with exclusive_lock(_lock_file(target), timeout, STAGING_HELD):
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


def content_digest(folder: str | os.PathLike) -> str | None:
    """One digest of every file under `folder`: their names (relative to it) and contents, in
    name order. Two copies of a data set have the same digest only if every file is whole; a
    missing or empty folder has None."""
    folder = Path(folder)
    paths = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    if not paths:
        return None
    total = hashlib.sha256()
    for path in paths:
        name = path.relative_to(folder).as_posix()
        total.update(f"{name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return total.hexdigest()[:16]


def bytes_digest(files: Mapping[str, bytes]) -> str | None:
    """`content_digest` of files not written anywhere: {relative name: contents}."""
    if not files:
        return None
    total = hashlib.sha256()
    for name in sorted(files):
        total.update(f"{name}\0{hashlib.sha256(files[name]).hexdigest()}\n".encode())
    return total.hexdigest()[:16]


SPAWNS = ("os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn")


def reads_archive(event: str, args: tuple, names: set[str]) -> bool:
    """Whether an audit event reads the archive (whose paths are `names`): an `open` of it, or
    a command line that names it (tar xf ARCHIVE)."""
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        return path in names or os.path.abspath(path) in names
    return event in SPAWNS and any(name in repr(args) for name in names)


def watch_reads(archive: str | os.PathLike, first_read_delay: float = 0.0) -> list:
    """A list that grows by one each time this process reads `archive` (a Python audit hook;
    it cannot be removed, so call it in a process that stages once and ends). The first read
    can be slowed by `first_read_delay` seconds, as on a busy shared file system, so that ranks
    that do not wait for each other are caught reading it too, however they are scheduled."""
    archive = Path(archive)
    names = {str(archive), str(archive.resolve())}
    seen: list = []

    def hook(event, args):
        if reads_archive(event, args, names):
            seen.append(event)
            if len(seen) == 1 and first_read_delay:
                time.sleep(first_read_delay)

    sys.addaudithook(hook)
    return seen


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


def node_share(ranks_on_node: int, world_size: int) -> float:
    """The share of the data set one node's ranks read per epoch: a DistributedSampler gives
    each of the job's ranks 1/world_size of the samples, so a node reads ranks_on_node of those
    shares, not the whole data set once per rank."""
    if not 1 <= ranks_on_node <= world_size:
        raise ValueError(
            f"ranks_on_node={ranks_on_node} must be between 1 and world_size={world_size}"
        )
    return ranks_on_node / world_size


def staging_saving(
    shared_read: float, local_read: float, stage_seconds: float, reads: float
) -> float:
    """Seconds a node saves by staging: `reads` whole reads of the data set by its ranks
    (epochs x `node_share`) from local disk instead of the shared folder, minus the time the
    staging took. Negative when staging costs more than it saves."""
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
