"""Reference GPU results for lessons 03 and 04, and how the lessons show them.

On a machine with a CUDA GPU, run
    python -m course_utils.reference_gpu            # writes course_utils/reference/gpu.json
    python -m course_utils.reference_gpu --n 10240  # the CUDA notes' TF32 size (needs ~2.5 GB)
and commit the JSON file. The lessons print it, labelled with device, PyTorch version and date,
where the GPU cells themselves are skipped. Without the file they say so; nothing is invented.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch

REFERENCE_DIR = Path(__file__).resolve().parent / "reference"
MISSING = (
    "no reference result recorded yet: run `python -m course_utils.reference_gpu` on a machine "
    "with a CUDA GPU and commit course_utils/reference/{name}.json"
)


def load_reference(name: str = "gpu", directory: Path | None = None) -> dict | None:
    """The stored reference results `name`.json, or None when none were recorded."""
    path = (directory or REFERENCE_DIR) / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def show_reference(section: str, name: str = "gpu", directory: Path | None = None) -> None:
    """Print one section of the stored reference results with its label, or say there are none."""
    ref = load_reference(name, directory)
    if ref is None or section not in ref.get("results", {}):
        print(MISSING.format(name=name))
        return
    print(
        f"reference result (not measured here): {ref['device']}, PyTorch {ref['torch']}, "
        f"{ref['date']}"
    )
    for key, value in ref["results"][section].items():
        print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")


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
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "results": {
            "lesson03": _lesson03(n03),
            "lesson04_tf32": _lesson04_tf32(n04),
            "lesson04_amp": _lesson04_amp(amp_steps),
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4096, help="matrix size of the TF32 experiment")
    p.add_argument("--out", type=Path, default=REFERENCE_DIR / "gpu.json")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "reference_gpu: no CUDA GPU found; nothing recorded (run this on a GPU node)",
            file=sys.stderr,
        )
        return 2  # never exit 0 as if it had run
    ref = record(n04=args.n)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(ref, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
