"""GPU demonstrations that need a fresh process: `python -m course_utils.jobs.gpu_demos DEMO`.

launch-error   an out-of-bounds index on the GPU; says at which line the error surfaced. Run it
               with and without CUDA_LAUNCH_BLOCKING=1 (a device-side assert breaks the CUDA
               context for the rest of the process, hence a child process).
no-cache       allocated vs reserved memory after freeing a tensor; run it with and without
               PYTORCH_NO_CUDA_MEMORY_CACHING=1 (read when CUDA initializes, hence a child).
Both exit with status 2 and a message where there is no CUDA GPU.
"""

from __future__ import annotations

import argparse
import sys

import torch


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
