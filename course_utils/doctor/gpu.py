"""`course doctor`'s GPU rows: the NVIDIA driver against this PyTorch's CUDA build, and each GPU
against the architectures compiled into it. The one rule for whether a build runs on a GPU node,
cubins (sm_XY) and PTX (compute_XY) alike, is `build_verdict`: taught in lesson 00 (which build
to install, exercise 00.3) and lesson 07 (update the driver or rebuild, exercise 07.3).

The deciding functions (`driver_finding`, `arch_supported`, `build_verdict`, `gpu_finding`) are
pure functions of the hardware's answers; `nvidia_driver` asks the node, nvidia-smi through
`processes.run`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

from course_utils import nvidia, processes
from course_utils.doctor.findings import ERROR, INFO, OK, WARN, Finding

# The NVIDIA driver a CUDA build needs: the minimum for CUDA minor-version compatibility in
# NVIDIA's CUDA toolkit release notes (13.x: 580; 12.x: 525.60.13; 11.x: 450.80.02).
MIN_DRIVER = {13: (580, 0, 0), 12: (525, 60, 13), 11: (450, 80, 2)}
# The driver each CUDA toolkit release needs (Linux x86_64, the GA releases: "CUDA Toolkit and
# Corresponding Driver Versions" in NVIDIA's release notes): a driver supports the newest CUDA
# whose entry it reaches, which is what nvidia-smi prints as "CUDA Version".
CUDA_DRIVERS = {
    (13, 0): (580, 65, 6),
    (12, 9): (575, 51, 3),
    (12, 8): (570, 26),
    (12, 6): (560, 28, 3),
    (12, 5): (555, 42, 2),
    (12, 4): (550, 54, 14),
    (12, 3): (545, 23, 6),
    (12, 2): (535, 54, 3),
    (12, 1): (530, 30, 2),
    (12, 0): (525, 60, 13),
    (11, 8): (520, 61, 5),
    (11, 4): (470, 42, 1),
    (11, 0): (450, 51, 5),
}


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def driver_finding(driver: str | None, cuda_build: str | None) -> Finding:
    """The NVIDIA driver against what this PyTorch's CUDA build needs."""
    if not cuda_build:
        return Finding("nvidia driver", driver or "not needed (CPU-only build)", INFO)
    if driver is None:
        return Finding("nvidia driver", "none found", INFO, "needed only on a GPU node")
    need = MIN_DRIVER.get(_version_tuple(cuda_build)[0])
    if need is None or _version_tuple(driver) >= need:
        return Finding("nvidia driver", f"{driver} (CUDA {cuda_build} build)", OK)
    wanted = ".".join(map(str, need)).removesuffix(".0.0")
    return Finding(
        "nvidia driver",
        f"{driver}, but this PyTorch is a CUDA {cuda_build} build: it needs {wanted} or newer",
        ERROR,
        f"CUDA will not initialize. Ask the admins for driver >= {wanted}, or install a PyTorch "
        "built for an older CUDA (e.g. pip install torch --index-url "
        "https://download.pytorch.org/whl/cu126) or the centre's PyTorch module",
    )


DRIVER_FILE = Path("/proc/driver/nvidia/version")


def nvidia_driver(driver_file: Path = DRIVER_FILE) -> str | None:
    """The NVIDIA kernel driver's version here (its /proc file, else nvidia-smi), or None."""
    try:
        text = driver_file.read_text()
        m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
        if m:
            return m[1]
    except OSError:
        pass
    try:
        done = processes.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], timeout=20
        )
    except OSError:  # no nvidia-smi on this node
        return None
    lines = done.stdout.split()
    return lines[0] if done.ok and lines else None


ARCH_NAME = re.compile(r"^(?P<kind>sm|compute)_(?P<major>\d+)(?P<minor>\d)(?P<suffix>[a-z]?)$")


def arch_supported(capability: tuple[int, int], arch_list: list[str]) -> bool:
    """Whether this build has code that fits a GPU of `capability`, the driver aside (that is
    `build_verdict`'s to add).

    A cubin sm_XY runs on GPUs of the same major version X and minor >= Y; an arch-specific
    cubin (sm_90a) only on exactly that GPU; PTX (compute_XY) can be JIT-compiled for any GPU
    >= X.Y, by a driver that knows its ISA version.
    """
    for arch in arch_list:
        m = ARCH_NAME.match(arch)
        if not m:
            continue
        built = (int(m["major"]), int(m["minor"]))
        if m["kind"] == "compute":
            ok = built <= capability
        elif m["suffix"]:
            ok = built == tuple(capability)
        else:
            ok = built[0] == capability[0] and built[1] <= capability[1]
        if ok:
            return True
    return False


def driver_cuda(driver: str) -> tuple[int, int] | None:
    """The newest CUDA version a driver ("570.86.10") supports, or None below CUDA 11.0's."""
    version = _version_tuple(driver)
    fits = [cuda for cuda, need in CUDA_DRIVERS.items() if version >= need]
    return max(fits) if fits else None


RUNS, UPDATE_DRIVER, REBUILD = "runs", "update the driver", "rebuild for the GPU"


def build_verdict(
    capability: tuple[int, int],
    arch_list: list[str],
    built_with: tuple[int, int],
    driver: tuple[int, int] | None,
) -> str:
    """Whether a build made by CUDA `built_with` runs on a GPU of `capability` under a driver for
    CUDA `driver` (None: too old for any): "runs", "update the driver" (only code that needs a
    newer driver fits the GPU) or "rebuild for the GPU" (nothing in the build fits it).

    A cubin that fits (`arch_supported`) runs under a driver of the build's CUDA major version or
    newer (minor versions are compatible); else PTX that fits is JIT-compiled only by a driver at
    least as new as the CUDA that wrote it (its ISA version); else nothing serves the GPU."""
    driver = driver or (0, 0)
    if arch_supported(capability, [a for a in arch_list if a.startswith("sm_")]):
        return RUNS if driver[0] >= built_with[0] else UPDATE_DRIVER
    if arch_supported(capability, [a for a in arch_list if a.startswith("compute_")]):
        return RUNS if tuple(driver) >= tuple(built_with) else UPDATE_DRIVER
    return REBUILD


def gpu_finding(index: int, name: str, cap: tuple[int, int], arch_list: list[str]) -> Finding:
    """One GPU against the architectures compiled into this PyTorch, with what to do."""
    value = f"{name}, compute capability {cap[0]}.{cap[1]}"
    if arch_supported(cap, arch_list):
        return Finding(f"gpu {index}", value, OK)
    advice = (
        f"this PyTorch has kernels for {', '.join(arch_list) or 'no GPU'} only: expect 'no "
        "kernel image is available for execution on the device'; install a build that includes "
        f'sm_{cap[0]}{cap[1]} (or build with TORCH_CUDA_ARCH_LIST="{cap[0]}.{cap[1]}")'
    )
    if tuple(cap) == (7, 0):  # V100: CUDA 13 dropped Volta, and it has no bf16 tensor cores
        advice += (
            ". A V100 (Volta): CUDA 12.8 and 13 builds no longer include it, the CUDA 12.6 "
            "builds do (pip install torch --index-url https://download.pytorch.org/whl/cu126, "
            "or the centre's module); train in fp16 autocast with GradScaler (lesson 04): bf16 "
            "has no tensor cores there"
        )
    return Finding(f"gpu {index}", value, ERROR, advice)


def sharing_findings(
    gpus: list[nvidia.Gpu], users: list[nvidia.GpuProcess], own_pid: int
) -> list[Finding]:
    """Who else may use this node's GPUs: each GPU's compute mode, and the processes other than
    this one that hold a CUDA context on it (a centre's hub: kernels of earlier lessons)."""
    rows = []
    for g in gpus:
        others = [p for p in users if p.gpu_uuid == g.uuid and p.pid != own_pid]
        if nvidia.is_exclusive(g.compute_mode):
            advice = (
                "one process at a time may hold this GPU: a second one (a child of a kernel "
                "that has used CUDA, two ranks on one GPU) fails with 'CUDA-capable device(s) "
                "is/are busy or unavailable'; lessons 03 and 05 take the route that works under it"
            )
            rows.append(Finding(f"gpu {g.index} mode", g.compute_mode, WARN, advice))
        if others:
            held = ", ".join(
                f"pid {p.pid} ({p.name}, {p.used_mib:.0f} MiB)" if p.used_mib else f"pid {p.pid}"
                for p in others
            )
            advice = (
                "other processes hold a CUDA context and cached memory here, such as kernels of "
                "earlier lessons: shut them down (Kernel > Shut Down Kernel, or JupyterLab's "
                "Running panel) before a lesson that needs the GPU's memory or the GPU alone"
            )
            rows.append(Finding(f"gpu {g.index} users", held, WARN, advice))
    if gpus and not rows:
        rows.append(Finding("gpu sharing", "default compute mode; no other process on it", OK))
    return rows


def gpus() -> list[Finding]:
    driver = driver_finding(nvidia_driver(), torch.version.cuda)
    if not torch.cuda.is_available():
        return [
            driver,
            Finding(
                "gpu",
                "none visible (torch.cuda.is_available() is False)",
                INFO,
                "fine for the CPU lessons; on a cluster ask for one with --gres=gpu:1",
            ),
        ]
    arch_list = torch.cuda.get_arch_list()
    rows = [driver] + [
        gpu_finding(
            i, torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i), arch_list
        )
        for i in range(torch.cuda.device_count())
    ]
    return rows + sharing_findings(nvidia.gpus(), nvidia.compute_processes(), os.getpid())
