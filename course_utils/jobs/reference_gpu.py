"""Record the GPU reference results that lessons 03 and 04 show (course_utils/reference/gpu.json).

On a machine with a CUDA GPU (`make test-gpu` runs it), then commit the JSON file:
    python -m course_utils.jobs.reference_gpu            # writes course_utils/reference/gpu.json
    python -m course_utils.jobs.reference_gpu --n 10240  # the CUDA notes' TF32 size (~2.5 GB)
The lessons show it with `course_utils.reference.show("gpu", section)`, labelled with device,
PyTorch version, date and the course's commit, where their GPU cells are skipped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from course_utils import paths, reference


def _lesson03(n: int) -> dict:
    from course_utils.timing import naive_vs_synced

    a = torch.randn(n, n, device="cuda")
    contrast = naive_vs_synced(torch.mm, a, a, device="cuda", repeats=10)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.mm(a, a)
    end.record()
    end.synchronize()
    del a
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    x = torch.empty(256 * 2**20, device="cuda")  # 1 GiB of float32
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    del x
    after_del = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    return {
        "matmul n": n,
        "compute capability": "{}.{}".format(*torch.cuda.get_device_capability()),
        "naive host clock, ms": contrast.naive * 1e3,
        "synchronized, ms": contrast.synced * 1e3,
        "CUDA events, ms": start.elapsed_time(end),
        "allocated after 1 GiB tensor, MiB": allocated / 2**20,
        "reserved after 1 GiB tensor, MiB": reserved / 2**20,
        "reserved after del, MiB": after_del / 2**20,
        "reserved after empty_cache, MiB": torch.cuda.memory_reserved() / 2**20,
        "peak allocated, MiB": torch.cuda.max_memory_allocated() / 2**20,
    }


def _lesson04_tf32(n: int) -> dict:
    from course_utils.precision import fp32_precision, relative_error
    from course_utils.timing import time_fn

    a64 = torch.randn(n, n, dtype=torch.float64, device="cuda")
    b64 = torch.randn(n, n, dtype=torch.float64, device="cuda")
    exact = a64 @ b64
    a, b = a64.float(), b64.float()
    out = {"matmul n": n}
    for mode in ("ieee", "tf32"):
        with fp32_precision(mode) as route:
            err = relative_error(a @ b, exact)
            t = time_fn(torch.mm, a, b, min_run_time=1.0)
        out[f"{mode} relative error"] = err
        out[f"{mode} ms per matmul"] = t.median * 1e3
        out["flags route"] = route
    out["tf32 speedup over ieee"] = out["ieee ms per matmul"] / out["tf32 ms per matmul"]
    return out


def _lesson04_amp(steps: int) -> dict:
    from course_utils.data import SyntheticCIFAR10, make_loader
    from course_utils.models import WideNet
    from course_utils.train import evaluate, train_one_epoch

    train = make_loader(SyntheticCIFAR10(train=True), batch_size=256)
    test = make_loader(SyntheticCIFAR10(train=False), batch_size=256, shuffle=False)
    out = {}
    for label, dtype in (
        ("fp32", None),
        ("fp16 autocast", torch.float16),
        ("bf16 autocast", torch.bfloat16),
    ):
        torch.manual_seed(0)
        model = WideNet().cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        scaler = torch.amp.GradScaler("cuda") if dtype is torch.float16 else None
        for _ in range(2):  # first epoch includes cuDNN autotuning and warm-up
            stats = train_one_epoch(
                model,
                train,
                opt,
                device="cuda",
                progress=False,
                max_steps=steps,
                autocast_dtype=dtype,
                scaler=scaler,
            )
        acc = evaluate(model, test, device="cuda", progress=False, autocast_dtype=dtype).accuracy
        out[f"{label} images/s"] = stats.images_per_second
        out[f"{label} test accuracy"] = acc
    return out


def record(n03: int = 4096, n04: int = 4096, amp_steps: int = 20) -> dict:
    """Measure everything on the current CUDA device; returns the labelled results."""
    return {
        **reference.label("reference_gpu", "cuda"),
        "results": {
            "lesson03": _lesson03(n03),
            "lesson04_tf32": _lesson04_tf32(n04),
            "lesson04_amp": _lesson04_amp(amp_steps),
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4096, help="matrix size of the TF32 experiment")
    p.add_argument("--out", type=Path, default=paths.REFERENCE_DIR / "gpu.json")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "reference_gpu: no CUDA GPU found; nothing recorded (run this on a GPU node)",
            file=sys.stderr,
        )
        return 2  # never exit 0 as if it had run
    reference.save(record(n04=args.n), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
