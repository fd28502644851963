"""Lesson 07 on a compute node: export the CNN, compile it for THIS node, run it in C++, compare.

    python -m course_utils.jobs.cpp_demo [--weights runs/07/net_weights.pt] [--batch 64]
    sbatch slurm/cpp_job.sh ...                       # the same as a batch job

AOTInductor generates code for the CPU or GPU it compiles on, so the package is built on the kind
of node it will run on. Exit code 1 when C++ and Python disagree.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from course_utils.cpp import build_programs, median_ms, run_model
from course_utils.device import pick_device
from course_utils.export import SAMPLE_SHAPE, aoti_package, export_model
from course_utils.models import Net
from course_utils.timing import time_fn


def demo(
    workdir: str | os.PathLike = "runs/07_cpp", weights: str | None = None, batch: int = 64
) -> int:
    """Export Net, package it for this node's device, build and run the C++ program, compare.

    What slurm/cpp_job.sh runs on a compute node: the package must be compiled on the kind of
    node it will run on (AOTInductor generates code for that CPU or GPU).
    """
    device = pick_device()
    torch.manual_seed(0)
    model = Net()
    if weights:
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    model = model.to(device).eval()
    x = torch.randn(batch, *SAMPLE_SHAPE, device=device)
    workdir = Path(workdir)
    package = aoti_package(export_model(model, x[:2]), workdir / "net.pt2")
    print(
        f"device {device}; package {package.path} "
        f"({'reused' if package.reused else f'compiled in {package.seconds:.1f} s'})"
    )
    build = build_programs(["aoti_run"])
    print(build)
    result = run_model(build.program("aoti_run"), package.path, x, workdir, repeat=50)
    with torch.no_grad():
        want = model(x).cpu()
    diff = (result.output - want).abs().max().item()
    print(f"max |C++ - Python| = {diff:.2e}")
    if device.type == "cuda":
        eager_ms = time_fn(model, x).median * 1e3  # synchronized; the C++ program syncs too
    else:  # timed as the C++ program times itself: per call, median of 50 after 5 warm-ups
        eager_ms = median_ms(model, x)
    print(
        f"latency, batch {batch}: Python eager {eager_ms:.3f} ms, "
        f"C++ AOTInductor {result.median_ms:.3f} ms (each the median of 50 calls)"
    )
    return 0 if diff <= 1e-4 else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="runs/07_cpp")
    parser.add_argument(
        "--weights", help="a state_dict saved by lesson 07, e.g. notebooks/runs/07/net_weights.pt"
    )
    parser.add_argument("--batch", type=int, default=64)
    a = parser.parse_args(argv)
    return demo(a.workdir, a.weights, a.batch)


if __name__ == "__main__":
    sys.exit(main())
