"""Matrix multiplication throughput in fp32, TF32 and bf16, against the device's peak."""

from __future__ import annotations

import sys

import torch

from benchmarks import common
from course_utils import reference
from course_utils.precision import fp32_precision
from course_utils.timing import time_fn

NAME = "matmul"
# Dense peak TFLOP/s from NVIDIA's data sheets (no sparsity): (fp32, tf32, bf16).
PEAK_TFLOPS = {
    "H200": (67.0, 494.7, 989.4),
    "H100 SXM": (67.0, 494.7, 989.4),
    "H100 80GB HBM3": (67.0, 494.7, 989.4),  # the SXM part's name in torch.cuda
    "H100 PCIe": (51.2, 378.0, 756.0),
    "H100 NVL": (60.0, 417.5, 835.0),
    "A100": (19.5, 156.0, 312.0),
    "L40S": (91.6, 183.0, 362.0),
    "A10": (31.2, 62.5, 125.0),
}
MODES = ("fp32", "tf32", "bf16")


def peak_for(device_name: str) -> dict[str, float] | None:
    """The data-sheet peaks of the first PEAK_TFLOPS key found in `device_name` (longest first)."""
    for key in sorted(PEAK_TFLOPS, key=len, reverse=True):
        if key.lower() in device_name.lower():
            return dict(zip(MODES, PEAK_TFLOPS[key]))
    return None


def tflops(n: int, mode: str, device: torch.device, min_run_time: float = 0.5) -> float:
    """Measured TFLOP/s of an n x n @ n x n matmul (2 n^3 operations) in `mode`."""
    dtype = torch.bfloat16 if mode == "bf16" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    with fp32_precision("tf32" if mode == "tf32" else "ieee"):
        t = time_fn(torch.mm, a, b, min_run_time=min_run_time, sync_device=device)
    return 2 * n**3 / t.median / 1e12


def run(
    device: torch.device,
    n: int | None = None,
    min_run_time: float = 0.5,
    peak: dict[str, float] | None = None,
) -> dict:
    n = n or (8192 if device.type == "cuda" else 1024)
    label = reference.label(NAME, device)
    peak = peak or peak_for(label["device"])
    rows = []
    for mode in MODES:  # side by side in one run: the ratios compare like with like
        rate = tflops(n, mode, device, min_run_time)
        rows.append(
            {
                "mode": mode,
                "TFLOP/s": rate,
                "speedup vs fp32": rate / rows[0]["TFLOP/s"] if rows else 1.0,
                "% of peak": 100 * rate / peak[mode] if peak else None,
            }
        )
    note = None
    if device.type == "cpu":
        note = "on the CPU the TF32 flags change nothing: TF32 is a tensor-core format"
    return {**label, "n": n, "peak_tflops": peak, "rows": rows, "note": note}


def main(argv=None) -> int:
    p = common.parser(NAME, __doc__)
    p.add_argument("--n", type=int, default=None, help="matrix size (default: 8192 GPU, 1024 CPU)")
    p.add_argument(
        "--peak",
        type=float,
        nargs=3,
        metavar=("FP32", "TF32", "BF16"),
        default=None,
        help="the device's peak TFLOP/s when it is not in the table",
    )
    p.add_argument("--min-run-time", type=float, default=0.5, help="seconds per measurement")
    args = p.parse_args(argv)
    device = common.resolve_device(args.device, p)
    peak = dict(zip(MODES, args.peak)) if args.peak else None
    result = run(device, args.n, args.min_run_time, peak)
    print(
        f"{result['device']}, PyTorch {result['torch']}, {result['date']}; n = {result['n']}; "
        f"peak {result['peak_tflops'] or 'unknown for this device (pass --peak)'}"
    )
    print(common.table(result["rows"], list(result["rows"][0])))
    if result["note"]:
        print(result["note"])
    common.save(result, args.out, NAME, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
