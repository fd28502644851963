"""Peak memory of one training step, three ways, each in a process of its own (lesson 09).

    python -m course_utils.jobs.memory_peak --batch 2048 --out result.json

After a warm-up on a tiny batch, for each step of course_utils.failing.memory.STEPS (big batch,
gradient accumulation, activation checkpointing) this process forks a child, so every child
starts from the same memory. The child resets its peak-RSS mark (/proc/self/clear_refs),
builds the model and batch, notes its resident memory, runs the step, and reports its peak
(VmHWM) minus that and minus the library pages it faulted in, with its gradients. Written as
JSON: {step: {"peak_bytes", "max_rel_diff"}}, the second the gradients' largest relative
difference from the big batch's. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
from pathlib import Path

from course_utils.failing import memory
from course_utils.files import atomic_write_text


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, value in memory.StepShape().__dict__.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=value)
    p.add_argument("--out", required=True, help="JSON file for the results")
    return p.parse_args(argv)


def status_bytes(field: str) -> int:
    """A memory field of /proc/self/status (VmRSS, VmHWM) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field} (this needs Linux)")


def file_backed_bytes() -> int:
    """Resident pages of mapped files (library code) and shared memory: not the step's data."""
    return status_bytes("RssFile") + status_bytes("RssShmem")


def measure_step(name: str, shape: memory.StepShape) -> tuple[int, list]:
    """In a fresh child: (peak bytes of the step above its start, its gradients).

    The peak mark counts every resident page, and a forked child faults library code back in
    as it runs it: how much of that lands in the step depends on the page cache (tens of MiB
    more on a cold CI machine). That growth is taken off, so the peak is the step's tensors.
    """
    Path("/proc/self/clear_refs").write_text("5")  # the peak mark restarts at the current RSS
    model, (x, y) = memory.deep_mlp(shape), memory.batch(shape)
    before, files_before = status_bytes("VmRSS"), file_backed_bytes()
    memory.STEP_FUNCTIONS[name](model, x, y, shape)
    peak, code_faulted_in = status_bytes("VmHWM"), file_backed_bytes() - files_before
    return peak - before - max(code_faulted_in, 0), memory.gradients(model)


def in_child(name: str, shape: memory.StepShape) -> tuple[int, list]:
    """Run `measure_step` in a forked child and return what it sent back."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, send, and leave without the parent's exit handlers
        os.close(read)
        try:
            data = pickle.dumps(measure_step(name, shape))
            code = 0
        except BaseException as e:
            data, code = pickle.dumps(RuntimeError(f"{name}: {type(e).__name__}: {e}")), 1
        with os.fdopen(write, "wb") as f:
            f.write(data)
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        result = pickle.loads(f.read())
    os.waitpid(pid, 0)
    if isinstance(result, Exception):
        raise result
    return result


def memory_returned_at_once() -> None:
    """Make glibc's malloc give every block of 64 KiB or more back to the system when it is
    freed (it otherwise keeps freed blocks of up to 32 MiB for reuse), so the resident memory
    follows the tensors alive and its peak is the step's. No effect where malloc is not glibc's."""
    import ctypes
    import platform

    if platform.libc_ver()[0] == "glibc":
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # from glibc's malloc.h
        libc.mallopt(m_mmap_threshold, 64 << 10)
        libc.mallopt(m_trim_threshold, 64 << 10)


def warm_up(shape: memory.StepShape) -> None:
    """Run every step once on a tiny batch, here, before forking: the first call of a step
    loads code and sets up autograd's machinery, memory that is not the step's own."""
    tiny = memory.StepShape(**{**shape.__dict__, "batch": shape.micro_batches, "width": 4})
    for step in memory.STEP_FUNCTIONS.values():
        step(memory.deep_mlp(tiny), *memory.batch(tiny), tiny)


def main(argv=None) -> int:
    args = parse_args(argv)
    shape = memory.StepShape(**{k: getattr(args, k) for k in memory.StepShape().__dict__})
    memory_returned_at_once()
    warm_up(shape)
    results, reference = {}, None
    for name in memory.STEPS:
        peak, grads = in_child(name, shape)
        reference = reference or grads
        diff = memory.max_relative_difference(grads, reference)
        results[name] = {"peak_bytes": peak, "max_rel_diff": diff}
    atomic_write_text(args.out, json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
