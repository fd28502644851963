"""Which device to compute on, and gates for cells that need particular hardware."""

from __future__ import annotations

import os

import torch

KINDS = ("cuda", "mps", "cpu")


def _available(kind: str) -> int:
    """How many devices of `kind` this process can use."""
    if kind == "cuda":
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        return int(mps is not None and mps.is_available())
    if kind == "cpu":
        return 1
    raise ValueError(f"device kind {kind!r} is not one of {KINDS}; pass one of those")


def pick_device(prefer: str | None = None) -> torch.device:
    """The device to use: env COURSE_DEVICE, else `prefer`, else cuda, then mps, then cpu.

    An explicit choice (env or `prefer`) that is not available raises ValueError rather than
    silently running somewhere else: a job that asked for a GPU should not quietly use the CPU.
    """
    choice = os.environ.get("COURSE_DEVICE") or prefer
    if choice:
        device = torch.device(choice)
        if _available(device.type) <= (device.index or 0):
            source = "COURSE_DEVICE" if os.environ.get("COURSE_DEVICE") else "prefer"
            raise ValueError(
                f"{source}={choice!r} asks for a device this process cannot see "
                f"({_available(device.type)} {device.type} device(s) found); "
                "unset it, or choose 'cpu'"
            )
        return device
    for kind in ("cuda", "mps"):
        if _available(kind):
            return torch.device(kind)
    return torch.device("cpu")


def requires(kind: str, count: int = 1) -> bool:
    """True when `count` devices of `kind` are present; else print why the cell is skipped."""
    found = _available(kind)
    if found >= count:
        return True
    names = {"cuda": "CUDA GPU", "mps": "Apple MPS device", "cpu": "CPU"}
    plural = "s" if count > 1 else ""
    print(f"skipped here: needs {count} {names[kind]}{plural}, found {found or 'none'}")
    return False


def synchronize(device: torch.device | str) -> None:
    """Wait for queued work on `device` (a no-op on the CPU, which runs synchronously)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
