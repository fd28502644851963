"""Host memory in a job: DataLoader workers that copy a dataset, the cgroup limit that kills them,
and the shared memory their batches travel through (lesson 09).

On a cluster a job's `--mem` is a cgroup limit: past it the kernel's out-of-memory killer sends
SIGKILL to the largest process of the job step, and Slurm reports it after the fact. Nothing
raises a Python exception first. The usual culprit is the DataLoader: each of its workers is a
process, and a dataset that each worker reads into memory of its own is held once per worker.

`ImageFile` is such a dataset, either way: `mmap=False` reads the whole file into each worker's
own memory (a copy each); `mmap=True` maps the file, so every worker reads the same pages of the
page cache (one copy, which the kernel can drop and read again instead of killing anything).
`tree_memory` measures what a process and its workers hold, each shared page once;
`memory_limit` reads the limit the job's cgroup enforces; `oom_report` and `killed_roles` read
what Slurm and the kernel wrote when they killed a step (course_utils.failing.shm: the DataLoader
and /dev/shm).
The program that runs all of it in a job is course_utils.jobs.loader_memory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

IMAGE_SHAPE = (3, 32, 32)  # CIFAR-10's
IMAGE_BYTES = 3 * 32 * 32  # one image, uint8
MiB = 2**20


def write_images(path, mib: int, shape: tuple[int, ...] = IMAGE_SHAPE, seed: int = 0) -> Path:
    """A .npy file of about `mib` MiB of uint8 images of `shape` (a stand-in for a preprocessed
    data set), written in chunks so the writer never holds it all. Deterministic for a seed."""
    if mib < 1:
        raise ValueError(f"mib={mib}: the file needs at least 1 MiB of images")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = max(1, mib * MiB // int(np.prod(shape)))
    images = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(count, *shape))
    rng = np.random.default_rng(seed)
    chunk_rows = max(1, 16 * MiB // int(np.prod(shape)))
    for start in range(0, count, chunk_rows):
        chunk = images[start : start + chunk_rows]
        chunk[...] = np.frombuffer(rng.bytes(chunk.size), np.uint8).reshape(chunk.shape)
    images.flush()
    del images
    return path


class ImageFile(Dataset):
    """The images of a .npy file, opened by each process on its first item: every DataLoader
    worker opens it for itself, as datasets that read files do (an HDF5 or LMDB file is opened
    per worker for the same reason: handles do not survive a fork).

    mmap=False: `np.load` reads the whole file into the worker's own memory, a private copy in
    every worker. mmap=True: `np.load(..., mmap_mode="r")` maps it: the workers read the same
    pages of the page cache, held once, and each item is copied out on its own.
    """

    def __init__(self, path, mmap: bool = False, announce: bool = False):
        self.path, self.mmap, self.announce = str(path), mmap, announce
        self.images = None  # opened in the process that reads the first item
        self.length = len(np.load(self.path, mmap_mode="r"))  # the header only

    def __len__(self) -> int:
        return self.length

    def open(self) -> None:
        self.images = np.load(self.path, mmap_mode="r" if self.mmap else None)
        if self.announce:
            how = "mapped (page cache, shared)" if self.mmap else "read into memory of its own"
            size = self.images.nbytes / MiB
            _say(f"{_who()} opened {Path(self.path).name}: {size:.0f} MiB {how}")

    def __getitem__(self, index: int) -> torch.Tensor:
        if self.images is None:
            self.open()
        return torch.from_numpy(np.array(self.images[index]))  # this item only, a copy


def _say(line: str) -> None:
    from course_utils.distributed import print_line

    print_line(line)


def _who() -> str:
    info = torch.utils.data.get_worker_info()
    return f"worker {info.id} (pid {os.getpid()})" if info else f"main process (pid {os.getpid()})"


# --- What a process tree holds -----------------------------------------------------------------


@dataclass(frozen=True)
class ProcessMemory:
    pid: int
    unshared: int  # bytes no other process holds (smaps' Private_Dirty: written, private pages)
    held: int  # its share of anonymous and shared memory (Pss_Anon + Pss_Shmem)


def rollup(text: str) -> dict[str, int]:
    """/proc/PID/smaps_rollup's fields in bytes ("Pss_Anon:  1024 kB" -> {"Pss_Anon": 1048576})."""
    return {k: int(v) * 1024 for k, v in re.findall(r"^(\w+):\s+(\d+) kB", text, re.M)}


def process_memory(pid: int) -> ProcessMemory:
    fields = rollup(Path(f"/proc/{pid}/smaps_rollup").read_text())
    held = fields.get("Pss_Anon", 0) + fields.get("Pss_Shmem", 0)
    return ProcessMemory(pid, fields.get("Private_Dirty", 0), held)


def tree_memory(pid: int | None = None) -> list[ProcessMemory]:
    """The memory of process `pid` (default: this one) and of its descendants, first the parent.

    `held` sums to what the tree cannot give back (anonymous and shared memory, each page counted
    once across the tree): what a cgroup's out-of-memory killer counts. Page-cache pages of
    mapped files are left out: the kernel drops them under pressure and reads them again.
    Linux only (/proc/PID/smaps_rollup, kernel 4.14 or newer).
    """
    import psutil

    root = psutil.Process(pid or os.getpid())
    found = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            found.append(process_memory(proc.pid))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # ended meanwhile
    return found


@dataclass(frozen=True)
class LoaderRun:
    """What reading a DataLoader gave, and what its processes held while they read."""

    batches: int
    checksum: int  # the sum of every value read: the file's own sum after a whole epoch
    held: list[ProcessMemory]  # the reading process first, then each worker

    @property
    def workers(self) -> list[ProcessMemory]:
        return self.held[1:]


def _loader_memory(batches_of) -> list[ProcessMemory]:
    """This process and the workers of this loader's iterator only: another child of this
    process (a test runner's, a notebook's) is not the loader's."""
    # PyTorch's worker processes (its iterator's list, 2.6 to 2.14); none in a workerless loader
    workers = getattr(batches_of, "_workers", [] if batches_of._num_workers == 0 else None)
    if workers is None:
        return tree_memory()
    found = []
    for pid in [os.getpid(), *(w.pid for w in workers)]:
        try:
            found.append(process_memory(pid))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # ended meanwhile
    return found


def read_loader(loader, batches: int | None = None, on_batch=None) -> LoaderRun:
    """Read `batches` batches of `loader` (None: a whole epoch) and measure `tree_memory` once
    every worker has had two batches to make: each has opened its data by then, and holds it.
    on_batch: called with each batch (a checker looks at what came)."""
    total = len(loader) if batches is None else min(batches, len(loader))
    measure_at = min(total, 2 * max(loader.num_workers, 1))
    checksum, read, held = 0, 0, []
    batches_of = iter(loader)
    for batch in batches_of:
        checksum += int(batch.sum(dtype=torch.int64))
        if on_batch is not None:
            on_batch(batch)
        read += 1
        if read == measure_at:
            held = _loader_memory(batches_of)
        if read == total:
            break
    return LoaderRun(read, checksum, held)


# --- The limit a job's cgroup enforces ---------------------------------------------------------

NO_LIMIT = 2**60  # cgroup v1 writes "no limit" as a number near 2**63


def memory_limit(cgroup_text: str | None = None, root: str = "/sys/fs/cgroup") -> int | None:
    """The tightest memory limit (bytes) on this process's cgroup and its ancestors: what
    Slurm's --mem became (ConstrainRAMSpace=yes). None where nothing is limited.

    cgroup_text: /proc/self/cgroup's text (read when None); v1 ("N:memory:/slurm/uid_0/job_5/
    step_0") reads memory.limit_in_bytes, v2 ("0::/...") reads memory.max.
    """
    if cgroup_text is None:
        cgroup_text = Path("/proc/self/cgroup").read_text()
    v1 = re.search(r"^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$", cgroup_text, re.M)
    v2 = re.search(r"^0::(.*)$", cgroup_text, re.M)
    if v1:
        base, name, path = Path(root) / "memory", "memory.limit_in_bytes", v1[1]
    elif v2:
        base, name, path = Path(root), "memory.max", v2[1]
    else:
        return None
    limits = []
    parts = [p for p in path.strip().split("/") if p]
    for depth in range(len(parts), -1, -1):
        file = base.joinpath(*parts[:depth], name)
        try:
            text = file.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < NO_LIMIT:
            limits.append(int(text))
    return min(limits) if limits else None


# --- What Slurm wrote when it killed a step ------------------------------------------------------


@dataclass(frozen=True)
class OomReport:
    """What a job's output file says about an out-of-memory kill."""

    oom_killed: bool  # slurmstepd counted oom-kill events, or srun said Out Of Memory
    events: int  # "Detected N oom-kill event(s)"
    step: str | None  # the step they were in ("52.0"; "52.batch" is the batch script itself)
    killed_worker: int | None  # pid of the DataLoader worker Python saw killed, if it saw one
    lines: tuple[str, ...]  # the lines that say so, as printed

    def who(self) -> str:
        if not self.oom_killed:
            return "no process was killed for memory"
        if self.killed_worker is not None:
            return f"a DataLoader worker (pid {self.killed_worker})"
        return "the step's main process (no Python error: SIGKILL leaves none)"


OOM_LINE = re.compile(
    r"^.*(?:Detected \d+ oom[-_]kill event|task \d+: Out Of Memory|"
    r"DataLoader worker \(pid\(?s?\)? ?\d+.*?\) (?:is killed by signal|exited unexpectedly)).*$",
    re.M,
)


def oom_report(output: str) -> OomReport:
    """Read a job's output file: slurmstepd's "Detected N oom-kill event(s) in StepId=J.S" (older
    releases: "in step J.S cgroup"; newer: "N oom_kill events in StepId=J.S"), srun's "task T:
    Out Of Memory", and the DataLoader's "worker (pid P) is killed by signal: Killed"."""
    events = sum(int(n) for n in re.findall(r"Detected (\d+) oom[-_]kill event", output))
    step = re.search(r"oom[-_]kill events?(?:\(s\))? in (?:StepId=|step )(\S+?)\.?(?:\s|$)", output)
    srun_oom = re.search(r"task \d+: Out Of Memory", output)
    worker = re.search(r"DataLoader worker \(pid (\d+)\) is killed by signal: Killed", output)
    return OomReport(
        oom_killed=bool(events or srun_oom),
        events=events,
        step=step[1] if step else None,
        killed_worker=int(worker[1]) if worker else None,
        lines=tuple(m[0].strip() for m in OOM_LINE.finditer(output)),
    )


def announced_pids(output: str) -> dict[str, str]:
    """{pid: role} of the processes the program said it runs ("main process (pid 5)", "worker 1
    (pid 7)"), from its output."""
    return {
        pid: role
        for role, pid in re.findall(r"^(main process|worker \d+) \(pid (\d+)\)", output, re.M)
    }


def killed_roles(output: str, kernel: tuple[str, ...] | list[str]) -> list[str]:
    """Who the kernel's "Killed process PID (name)" lines name, by the roles the program printed
    ("main process (pid 5)", "worker 1 (pid 7)"); a pid it never printed stays "pid 9 (name)"."""
    roles = announced_pids(output)
    killed = []
    for line in kernel:
        m = re.search(r"Killed process (\d+) \(([^)]*)\)", line)
        if m:
            killed.append(
                f"{roles[m[1]]} (pid {m[1]})" if m[1] in roles else f"pid {m[1]} ({m[2]})"
            )
    return killed
