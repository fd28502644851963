"""What every benchmark shares: --device and --out, the label of a result, the table, the file."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
from pathlib import Path

import torch

from course_utils import hpc
from course_utils.device import pick_device

DEFAULT_DIR = Path("runs") / "benchmarks"


class NeedsGPU(Exception):
    """This benchmark cannot run on the device it got; the message says why."""


def parser(name: str, doc: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=doc)
    p.add_argument("--device", default="auto", help="auto (GPU if there is one), cpu, cuda, cuda:1")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"JSON file to write (default: {DEFAULT_DIR}/{name}-<device>.json)",
    )
    return p


def resolve_device(name: str, p: argparse.ArgumentParser | None = None) -> torch.device:
    """`auto`: the best device here; anything else must be available, else ValueError (or,
    given the parser, its usage error: exit code 2)."""
    try:
        return pick_device(None if name == "auto" else name)
    except ValueError as e:
        if p is None:
            raise
        p.error(f"--device {name}: {e}")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = _cpu_model() or platform.processor() or platform.machine()
    return f"{model} ({hpc.allocated_cpus()} CPUs)"


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def label(name: str, device: torch.device) -> dict:
    """Who measured what: benchmark, device, PyTorch version, date."""
    return {
        "benchmark": name,
        "device": device_name(device),
        "device_type": device.type,
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "torch_threads": torch.get_num_threads(),
    }


def table(rows: list[dict], columns: list[str]) -> str:
    """A plain text table of `rows` (dicts), floats with thousands separators."""

    def cell(v):
        if isinstance(v, float):
            return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}"
        return "-" if v is None else str(v)

    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    numeric = [
        all(isinstance(r.get(c), (int, float)) or r.get(c) is None for r in rows) for c in columns
    ]
    for row in cells:
        lines.append(
            "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(row, widths, numeric))
        )
    return "\n".join(lines)


def save(result: dict, out: Path | None, name: str, device: torch.device) -> Path:
    out = out or DEFAULT_DIR / f"{name}-{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, out)  # a reader never sees half a file
    print(f"wrote {out}")
    return out
