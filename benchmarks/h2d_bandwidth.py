"""Host-to-device copy bandwidth, pageable against pinned memory, against the link's nominal peak.

Needs a CUDA GPU (pinned memory and host-to-device copies do not exist without one); without one
it says so and exits with code 2, writing nothing.
"""

from __future__ import annotations

import shutil
import sys

import torch

from benchmarks import common
from course_utils import processes, reference
from course_utils.timing import copy_bandwidth

NAME = "h2d_bandwidth"
# Usable GB/s per lane after line encoding (PCIe 3.0+: 128b/130b; 6.0: PAM4 with FLIT, ~7.56).
PCIE_GBS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_peak_gbs(generation: int, width: int) -> float:
    """Nominal one-direction bandwidth of a PCIe link in GB/s (1e9 bytes per second)."""
    if generation not in PCIE_GBS_PER_LANE or width < 1:
        raise ValueError(
            f"PCIe generation {generation} x{width}: generation must be one of "
            f"{sorted(PCIE_GBS_PER_LANE)} and width >= 1; pass --peak-gbs instead"
        )
    return PCIE_GBS_PER_LANE[generation] * width


def query_link(index: int = 0) -> tuple[int, int] | None:
    """(generation, width) of GPU `index`'s PCIe link, the GPU's maximum, from nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    done = processes.run(
        [
            exe,
            f"--id={index}",
            "--query-gpu=pcie.link.gen.max,pcie.link.width.max",
            "--format=csv,noheader,nounits",
        ],
        timeout=20,
    )
    try:
        gen, width = (int(v) for v in done.stdout.strip().splitlines()[0].split(","))
    except (ValueError, IndexError):
        return None
    return gen, width


def bandwidth(src: torch.Tensor, device: torch.device, non_blocking: bool) -> float:
    """GB/s of copying `src` to `device`: lesson 02's `timing.copy_bandwidth`, one code path."""
    return copy_bandwidth(src, device, non_blocking=non_blocking, min_run_time=0.3)


def run(device: torch.device, sizes_mb=(1, 16, 256), peak_gbs: float | None = None) -> dict:
    if device.type != "cuda":
        raise common.NeedsGPU(
            f"needs a CUDA GPU (pinned memory, host-to-device copies); running on {device.type}"
        )
    rows = []
    for mb in sizes_mb:
        pageable = torch.empty(int(mb * 2**20) // 4, dtype=torch.float32)
        pinned = pageable.pin_memory()
        rows.append(
            {
                "MiB": mb,
                "pageable GB/s": bandwidth(pageable, device, False),
                "pinned GB/s": bandwidth(pinned, device, True),
            }
        )
        rows[-1]["pinned / pageable"] = rows[-1]["pinned GB/s"] / rows[-1]["pageable GB/s"]
    link = query_link(device.index or 0)
    if peak_gbs is None and link is not None:
        peak_gbs = pcie_peak_gbs(*link)
    for row in rows:
        row["pinned % of peak"] = 100 * row["pinned GB/s"] / peak_gbs if peak_gbs else None
    return {
        **reference.label(NAME, device),
        "link": f"PCIe gen{link[0]} x{link[1]}" if link else "unknown (pass --peak-gbs)",
        "nominal_peak_gbs": peak_gbs,
        "rows": rows,
    }


def main(argv=None) -> int:
    p = common.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--sizes-mb", type=float, nargs="+", default=[1, 16, 256])
    p.add_argument(
        "--peak-gbs",
        type=float,
        default=None,
        help="the link's nominal GB/s (default: from nvidia-smi's PCIe generation)",
    )
    args = p.parse_args(argv)
    device = common.resolve_device(args.device, p)
    try:
        result = run(device, args.sizes_mb, args.peak_gbs)
    except common.NeedsGPU as e:
        print(f"{NAME}: skipped: {e}; nothing written", file=sys.stderr)
        return 2  # never exit 0 as if it had run
    print(
        f"{result['device']}, PyTorch {result['torch']}, {result['date']}; link "
        f"{result['link']}, nominal peak {result['nominal_peak_gbs']} GB/s"
    )
    print(common.table(result["rows"], list(result["rows"][0])))
    common.save(result, args.out, NAME, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
