"""What the scheduler gave this job, and fitting the process to it: PyTorch's threads (lessons 02
and 08), DataLoader workers (lesson 02), and a steady malloc for measurements (lesson 08)."""

from __future__ import annotations

import os

from course_utils.environment import env_int

# torch is imported where a function needs it: `course grade` sizes its runs with
# allocated_cpus, and importing torch costs it seconds (about 2 s on 2 busy cores).


def affinity_cpus() -> int:
    """CPUs this process may run on (its affinity mask), which cgroups and taskset restrict."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def allocated_cpus(environ=None) -> int:
    """CPUs allocated to this task: SLURM_CPUS_PER_TASK, else the process's CPU affinity.

    For this process (environ None) the narrower of the two wins: where Slurm binds tasks to
    cores, a task that srun started without `-c` (Slurm 22.05 to 23.02 do not pass the job's
    CPUs per task on) may run on fewer CPUs than the variable says, and its affinity is the
    truth; where a site does not bind cores, the affinity is the whole node and the variable is
    the allocation. A job's variables passed as `environ` describe another task: only they count.
    """
    asked = env_int("SLURM_CPUS_PER_TASK", environ, None, minimum=1)
    if environ is not None:
        return asked or affinity_cpus()
    mask = affinity_cpus()
    return min(asked, mask) if asked else mask


def configure_threads(n: int | None = None) -> int:
    """Set torch's intra-op threads to `n` (default: the allocated CPUs) and return the count.

    PyTorch sizes its pool from the CPUs the process may run on: where a site does not confine
    jobs to their cores, that is the whole node, and a job with --cpus-per-task=4 would otherwise
    run dozens of threads on 4 cores.
    """
    if n is None:
        n = allocated_cpus()
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"thread count {n!r} must be a positive integer, e.g. allocated_cpus()")
    import torch

    torch.set_num_threads(n)
    return torch.get_num_threads()


# CPUs per GPU that the course's GPU scripts ask for (slurm/*.sh; a test holds them to it).
# Clusters sell a GPU in a bundle with a share of the node's cores and memory ("Ratios in
# bundles" in the cluster documentation): on yours, ask for that share.
CPUS_PER_GPU = 4


def loader_workers(device, environ=None) -> int:
    """DataLoader workers for training on `device`, the documentation's rule: on a GPU, one per
    allocated CPU (they prepare batches while the GPU computes); on the CPU none, since workers
    would compete with the computation for the same cores (lesson 02 measures it).
    `environ` (default os.environ) holds the job's variables."""
    import torch

    return allocated_cpus(environ) if torch.device(device).type == "cuda" else 0


def configure_interop_threads(n: int | None = None) -> int:
    """Size torch's inter-op pool to `n` (default: the allocated CPUs) and return its size.

    The inter-op pool runs independent operators at the same time (torch.jit.fork in TorchScript);
    like the intra-op pool, it is sized from the CPUs the process may run on, the whole node where
    jobs are not confined to their cores. PyTorch accepts this once per process, before any
    inter-op work: a later call leaves the pool as it is, and the returned size says which it is.
    Taught in lesson 02.
    """
    if n is None:
        n = allocated_cpus()
    if not isinstance(n, int) or n < 1:
        raise ValueError(
            f"inter-op thread count {n!r} must be a positive integer, e.g. allocated_cpus()"
        )
    import torch

    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # set before, or inter-op work has started: the pool keeps its size
        pass
    return torch.get_num_interop_threads()


def in_slurm_job(environ=None) -> bool:
    environ = os.environ if environ is None else environ
    return "SLURM_JOB_ID" in environ


# glibc's malloc returns each freed block over its threshold (128 KiB at start: every batch's
# activations) to the kernel, and the next step page-faults fresh zeroed pages in again. The
# threshold adapts, but only to the largest block the process has freed so far, so a recipe
# measured after a large-batch one inherits a higher threshold and looks faster (on the course's
# 2-core machine the documentation script went from about 11,000 to 15,000 images/s that way).
# Fixed thresholds make every measurement start alike and keep blocks up to 32 MiB for reuse, the
# role jemalloc or tcmalloc play in PyTorch's CPU performance tuning guide.
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 << 20, 64 << 20
MALLOC_TUNABLES = (
    f"glibc.malloc.mmap_threshold={MMAP_THRESHOLD}:glibc.malloc.trim_threshold={TRIM_THRESHOLD}"
)


def steady_allocator() -> bool:
    """Fix glibc malloc's thresholds for the rest of this process (MALLOC_TUNABLES' values).

    Call it before comparing recipes in one process: then no measurement gains from what an
    earlier one freed. It cannot be undone (glibc stops adapting once set), and a job gets the
    same from `export GLIBC_TUNABLES=<hpc.MALLOC_TUNABLES>` in its script. Returns False where
    malloc is not glibc's (macOS, Alpine), which changes nothing.
    """
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL("libc.so.6")
    m_trim_threshold, m_mmap_threshold = -1, -3  # from glibc's malloc.h
    return bool(
        libc.mallopt(m_mmap_threshold, MMAP_THRESHOLD)
        and libc.mallopt(m_trim_threshold, TRIM_THRESHOLD)
    )
