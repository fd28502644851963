"""Energy of a run, where the hardware reports it: NVML's total energy counter on NVIDIA GPUs,
RAPL's package counters where the kernel lets this user read them, else "not reported".
Taught in lesson 10, whose run records carry it.

    meter = energy.EnergyMeter.start(device)
    ...                                  # the work
    print(meter.stop())                  # Energy(joules=..., source="nvml", scope=...)

NVML (the nvidia-ml-py package, `import pynvml`) counts millijoules since the driver loaded
(`nvmlDeviceGetTotalEnergyConsumption`, Volta and newer). RAPL counts microjoules per CPU
package in /sys/class/powercap/intel-rapl:N/energy_uj (AMD CPUs show there too); the file is
root-only on most systems since 2020, and it counts the whole package: other jobs on the node
included. Which source is used is a plain function of what was readable (`choose_source`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RAPL_ROOT = Path("/sys/class/powercap")
NOT_REPORTED = "not reported"


@dataclass(frozen=True)
class Energy:
    """Joules used between start and stop, by what, and why when there is no figure."""

    joules: float | None
    source: str  # "nvml", "rapl" or "not reported"
    scope: str  # what was counted, or why nothing was

    def as_dict(self) -> dict:
        return {"joules": self.joules, "source": self.source, "scope": self.scope}


def choose_source(nvml_reading: int | None, rapl_reading: int | None, device_type: str) -> str:
    """ "nvml" on a GPU whose counter answered, else "rapl" when its counters are readable,
    else "not reported". A GPU job is counted by its GPU: RAPL would add the CPU package."""
    if device_type == "cuda" and nvml_reading is not None:
        return "nvml"
    if rapl_reading is not None:
        return "rapl"
    return NOT_REPORTED


def counter_delta(before: int, after: int, wraps_at: int | None) -> int:
    """after - before for a counter that restarts from 0 past `wraps_at` (RAPL's
    max_energy_range_uj); NVML's 64-bit counter does not wrap (wraps_at=None)."""
    if after >= before:
        return after - before
    if wraps_at is None:
        raise ValueError(
            f"energy counter went backwards ({before} -> {after}) and is not one that wraps: "
            "was the driver reloaded during the run?"
        )
    return wraps_at - before + after


def rapl_packages(root: Path = RAPL_ROOT) -> list[Path]:
    """RAPL package domains (intel-rapl:0, intel-rapl:1, ...; not their sub-domains)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if re.fullmatch(r"intel-rapl:\d+", p.name))


def read_rapl(root: Path = RAPL_ROOT) -> int | None:
    """Microjoules summed over the CPU packages, or None where they are missing or unreadable."""
    total = 0
    packages = rapl_packages(root)
    try:
        for package in packages:
            total += int((package / "energy_uj").read_text())
    except (OSError, ValueError):
        return None
    return total if packages else None


def _rapl_wrap(root: Path) -> int | None:
    try:
        ranges = [int((p / "max_energy_range_uj").read_text()) for p in rapl_packages(root)]
    except (OSError, ValueError):
        return None
    return max(ranges) if ranges else None


def nvml_index(device) -> int:
    """The NVML number of a CUDA device. NVML numbers every GPU of the machine; CUDA only those
    CUDA_VISIBLE_DEVICES shows (with --gpus-per-task=1 each task's cuda:0 is another GPU).
    PyTorch's own mapping is private, so it is looked for, not assumed."""
    import torch

    index = torch.device(device).index or 0
    mapping = getattr(torch.cuda, "_get_nvml_device_index", None)
    try:
        return mapping(index) if mapping else index
    except Exception:  # no NVML, or a CUDA_VISIBLE_DEVICES it cannot read: CUDA's number
        return index


def nvml_reader(index: int) -> Callable[[], int] | None:
    """A function returning GPU `index`'s total energy in millijoules, or None without NVML
    (nvidia-ml-py not installed, no driver, or a GPU older than Volta)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception:  # ImportError, NVMLError_* (no driver, not supported): no counter
        return None
    return lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)


@dataclass
class EnergyMeter:
    """Reads the chosen counter at start and at stop."""

    source: str
    read: Callable[[], int] | None
    scale: float  # joules per counter unit
    wraps_at: int | None
    scope: str
    before: int | None = None
    started: float = 0.0

    @classmethod
    def start(cls, device, rapl_root: Path = RAPL_ROOT, index: int | None = None) -> EnergyMeter:
        """Start counting for `device`; `index`: its NVML number where the caller matched it by
        UUID (nvidia.index_of), else PyTorch's mapping (`nvml_index`)."""
        import torch

        device = torch.device(device)
        if index is None and device.type == "cuda":
            index = nvml_index(device)
        nvml = nvml_reader(index) if device.type == "cuda" else None
        rapl = read_rapl(rapl_root)
        source = choose_source(nvml() if nvml else None, rapl, device.type)
        if source == "nvml":
            meter = cls(source, nvml, 1e-3, None, f"{device} (NVML total energy)")
        elif source == "rapl":
            scope = "CPU packages of the node (RAPL; other jobs on the node included)"
            meter = cls(source, lambda: read_rapl(rapl_root), 1e-6, _rapl_wrap(rapl_root), scope)
        else:
            why = (
                "no NVML counter (no NVIDIA GPU, or nvidia-ml-py not installed)"
                if device.type == "cuda"
                else "no GPU, and RAPL is not readable here"
            )
            meter = cls(NOT_REPORTED, None, 0.0, None, why)
        meter.before = meter.read() if meter.read else None
        meter.started = time.perf_counter()
        return meter

    def stop(self) -> Energy:
        if self.read is None or self.before is None:
            return Energy(None, NOT_REPORTED, self.scope)
        used = counter_delta(self.before, self.read(), self.wraps_at) * self.scale
        return Energy(used, self.source, self.scope)
