"""What bounds one notebook run: `Limits` and their defaults (the one place they are written;
`course grade --help` reads them from here), and sizes as the command line writes them (8G).

The sandbox (sandbox.py) applies the memory, file, CPU and process limits with prlimit and a
pids cgroup (cgroups.py); the runner (nbval_runner.py) applies the time limits. 0 is no limit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from course_utils.grading.runner import cgroups

MiB, GiB = 2**20, 2**30


@dataclass(frozen=True)
class Limits:
    """What bounds one run; the defaults below are `course grade`'s (`DEFAULTS`)."""

    timeout: float = 600  # seconds for the whole notebook, kernel start included
    cell_timeout: float = 120  # seconds per cell
    threads: int = 1  # OMP/MKL threads of each grading kernel
    sandbox: bool = True  # in the bubblewrap sandbox; False: as the grader's user (course check)
    max_procs: int = 512  # processes and threads at once (sandbox; 0: no limit)
    max_memory: int = 8 * GiB  # bytes of address space per process, RLIMIT_AS (sandbox; 0: none)
    max_file_size: int = GiB  # bytes per file written, RLIMIT_FSIZE (with or without sandbox)
    max_disk: int = 2 * GiB  # bytes of the sandbox's writable tmpfs (and of its /dev/shm)
    cpu_time: int = 0  # CPU seconds per process, RLIMIT_CPU (sandbox; 0: no limit)

    def describe(self) -> str:
        """The gradebook's `sandbox` column: what bounded each run."""
        if not self.sandbox:
            return "none"
        cpu = f"{self.cpu_time} s" if self.cpu_time else "no limit"
        return (
            f"bubblewrap, no network; processes {self.max_procs or 'no limit'} "
            f"({cgroups.process_cap_kind(self.max_procs)}), "
            f"memory {format_size(self.max_memory)}, "
            f"file {format_size(self.max_file_size)}, "
            f"disk {format_size(self.max_disk)}, CPU {cpu}"
        )


DEFAULTS = Limits()


def default_limits(
    timeout: float, jobs: int, cell_timeout: float | None = None, **sandbox_settings
) -> Limits:
    """Limits of each run when `jobs` runs share the allocated CPUs; `sandbox_settings` are
    Limits' sandbox fields (sandbox, max_procs, max_memory, max_file_size, max_disk, cpu_time);
    None keeps the default. CPU time defaults to what every allocated CPU could spend in
    `timeout`, so it never ends a run the time limit would not."""
    from course_utils.hpc import allocated_cpus

    cell = cell_timeout if cell_timeout else min(timeout, DEFAULTS.cell_timeout)
    settings = {k: v for k, v in sandbox_settings.items() if v is not None}
    settings.setdefault("cpu_time", math.ceil(timeout * allocated_cpus()))
    return Limits(
        timeout=timeout,
        cell_timeout=min(cell, timeout),
        threads=max(1, allocated_cpus() // max(1, jobs)),
        **settings,
    )


# ---- sizes on the command line and in the gradebook ----------------------------------------

_UNITS = {"": 1, "k": 2**10, "m": MiB, "g": GiB, "t": 2**40}


def parse_size(text: str, option: str = "size") -> int:
    """Bytes from "8G", "512M", "100k" or "1048576" (binary units); 0 means no limit."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(
            f"{option} {text!r}: give a size such as 8G, 512M or 0 (no limit); units k, M, G, "
            "T are powers of 1024"
        )
    return int(float(m[1]) * _UNITS[m[2].lower()])


def size_option(n: int) -> str:
    """`n` bytes as an option takes it: "8G", "512M", "100k", "123" (`parse_size` reads it back)."""
    for unit in ("T", "G", "M", "k"):
        size = _UNITS[unit.lower()]
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def format_size(n: int) -> str:
    """ "8 GiB", "512 MiB", "100 KiB" or "123 B"; "no limit" for 0."""
    if not n:
        return "no limit"
    for unit, size in (("TiB", 2**40), ("GiB", GiB), ("MiB", MiB), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"
