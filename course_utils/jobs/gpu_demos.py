"""GPU demonstrations that need a fresh process: `python -m course_utils.jobs.gpu_demos DEMO`.

launch-error   an out-of-bounds index on the GPU; says at which line the error surfaced. Run it
               with and without CUDA_LAUNCH_BLOCKING=1 (a device-side assert breaks the CUDA
               context for the rest of the process, hence a child process).
no-cache       allocated vs reserved memory after freeing a tensor; run it with and without
               PYTORCH_NO_CUDA_MEMORY_CACHING=1 (read when CUDA initializes, hence a child).
Both exit with status 2 and a message where there is no CUDA GPU.

Lesson 03 starts them from its kernel with `in_child`, where `route` allows it: under
exclusive-process compute mode (many centres set it) only one process may hold a context on the
GPU, so a child of a kernel that holds one fails with "CUDA-capable device(s) is/are busy or
unavailable". `route` decides from the GPU's compute mode (`nvidia.gpus()`, matched to the
kernel's GPU by UUID) and whether the kernel holds a context; tests inject the mode.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import torch

from course_utils import nvidia, processes

DEMO_TIMEOUT = 120  # seconds for one demonstration, CUDA's start included


@dataclass(frozen=True)
class Route:
    child: bool  # the demo may run in a child process of this kernel
    why: str  # one line that says so, or why not and what to do instead


def route(compute_mode: str | None, kernel_has_context: bool) -> Route:
    """Whether a child process of this kernel can create a CUDA context on the kernel's GPU."""
    mode = compute_mode or "unknown (no nvidia-smi)"
    if compute_mode is not None and nvidia.is_exclusive(compute_mode) and kernel_has_context:
        return Route(
            False,
            f"skipped here: the GPU's compute mode is {compute_mode} and this kernel holds its "
            "CUDA context, so a child process would fail with 'CUDA-capable device(s) is/are "
            "busy or unavailable'. Run it where no other process holds the GPU: in a terminal "
            "after shutting this kernel down, or in a batch job (python -m "
            "course_utils.jobs.gpu_demos DEMO)",
        )
    if compute_mode is not None and compute_mode.strip().lower() == "prohibited":
        return Route(
            False, "skipped here: the GPU's compute mode is Prohibited (no process may use it)"
        )
    held = "holds" if kernel_has_context else "does not hold"
    return Route(True, f"in a child process: compute mode {mode}, this kernel {held} a context")


def kernel_route() -> Route:
    """`route` for this process: its GPU's compute mode from nvidia-smi, matched by UUID, and
    whether it holds a CUDA context already."""
    properties = torch.cuda.get_device_properties(torch.cuda.current_device())
    mode = nvidia.mode_of(nvidia.gpus(), nvidia.torch_uuid(properties))
    return route(mode, kernel_has_context=torch.cuda.is_initialized())


def in_child(demo: str, **env: str) -> str:
    """Run `demo` in a fresh Python with `env` added to this environment; what it printed."""
    command = [sys.executable, "-m", "course_utils.jobs.gpu_demos", demo]
    done = processes.run(command, env={**os.environ, **env}, timeout=DEMO_TIMEOUT)
    return done.stdout.strip() or done.stderr.strip()[-300:]


def launch_error() -> None:
    x = torch.zeros(10, device="cuda")
    index = torch.tensor([20], device="cuda")  # out of bounds: the kernel asserts on the GPU
    line = "1 (the faulty indexing)"
    try:
        y = x[index]
        line = "2 (an innocent addition after it)"
        z = y + 1
        line = "3 (the synchronization)"
        torch.cuda.synchronize()
        print(f"no error surfaced; z = {z}")
    except RuntimeError as e:
        print(f"the error surfaced at line {line}: {str(e).splitlines()[0]}")


def no_cache() -> None:
    x = torch.empty(64 * 2**20, device="cuda")  # 256 MiB of float32
    del x
    allocated = torch.cuda.memory_allocated() / 2**20
    reserved = torch.cuda.memory_reserved() / 2**20
    print(f"after del: allocated {allocated:.0f} MiB, reserved by the cache {reserved:.0f} MiB")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="GPU demonstrations of lesson 03")
    p.add_argument("demo", choices=["launch-error", "no-cache"])
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_demos: no CUDA GPU found; nothing ran", file=sys.stderr)
        return 2
    {"launch-error": launch_error, "no-cache": no_cache}[args.demo]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
