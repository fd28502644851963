"""What every benchmark shares: --device and --out, the device decision, the table, the file.

The label of a result (device, PyTorch, date, commit) and its file come from course_utils.reference,
the same as the lessons' references; the device from course_utils.device.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from course_utils import reference
from course_utils.device import pick_device
from course_utils.tables import text_table

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


def table(rows: list[dict], columns: list[str]) -> str:
    """`rows` (dicts) as a text table of `columns`."""
    return text_table(columns, [[r.get(c) for c in columns] for r in rows])


def save(result: dict, out: Path | None, name: str, device: torch.device) -> Path:
    out = reference.save(result, out or DEFAULT_DIR / f"{name}-{device.type}.json")
    print(f"wrote {out}")
    return out
