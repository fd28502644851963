"""What a node's NVIDIA GPUs say about themselves: UUIDs, compute mode, the processes on them.

Taught in lesson 00 (`course doctor` reads the compute mode and the other processes holding a
GPU); lessons 03 and 05 take the route that works under exclusive-process mode; lesson 10 matches
each rank's GPU by UUID (CUDA's, NVML's and a cgroup-constrained step's indices need not agree).

Everything is read through `nvidia-smi --query-...` (`processes.run`, so tests answer for it) and
parsed by pure functions, tested with the hardware's answers injected. No GPU, no nvidia-smi:
empty lists, never an error.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from course_utils import processes

# nvidia-smi's words for NVML's compute modes (nvmlComputeMode_t 0, 2, 3; 1 was removed).
DEFAULT, PROHIBITED, EXCLUSIVE_PROCESS = "Default", "Prohibited", "Exclusive_Process"
GPU_FIELDS = ("index", "uuid", "name", "compute_mode")
APP_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")


@dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi's index on this node (not necessarily CUDA's)
    uuid: str  # GPU-xxxxxxxx-xxxx-...: the same in NVML, nvidia-smi and PyTorch
    name: str
    compute_mode: str


@dataclass(frozen=True)
class GpuProcess:
    gpu_uuid: str
    pid: int
    name: str
    used_mib: float | None


def parse_csv(text: str, fields: tuple[str, ...]) -> list[dict[str, str]]:
    """Rows of `nvidia-smi --query-...=FIELDS --format=csv,noheader,nounits` as dicts."""
    rows = []
    for line in text.strip().splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(fields):
            rows.append(dict(zip(fields, values)))
    return rows


def parse_gpus(text: str) -> list[Gpu]:
    return [
        Gpu(int(r["index"]), r["uuid"], r["name"], r["compute_mode"])
        for r in parse_csv(text, GPU_FIELDS)
        if r["index"].isdigit()
    ]


def parse_processes(text: str) -> list[GpuProcess]:
    found = []
    for r in parse_csv(text, APP_FIELDS):
        if not r["pid"].isdigit():
            continue
        used = r["used_memory"]
        mib = float(used) if used.replace(".", "", 1).isdigit() else None
        found.append(GpuProcess(r["gpu_uuid"], int(r["pid"]), r["process_name"], mib))
    return found


def _query(kind: str, fields: tuple[str, ...]) -> str:
    if shutil.which("nvidia-smi") is None:
        return ""
    done = processes.run(
        ["nvidia-smi", f"--query-{kind}={','.join(fields)}", "--format=csv,noheader,nounits"],
        timeout=30,
    )
    return done.stdout if done.ok else ""


def gpus() -> list[Gpu]:
    """The node's GPUs as nvidia-smi lists them (all of them, whatever this process may use)."""
    return parse_gpus(_query("gpu", GPU_FIELDS))


def compute_processes() -> list[GpuProcess]:
    """The processes holding a CUDA context on any of the node's GPUs (host pids; inside a
    container the list may be empty)."""
    return parse_processes(_query("compute-apps", APP_FIELDS))


def is_exclusive(mode: str) -> bool:
    """Exclusive-process mode: one process may hold a context on the GPU at a time, so a second
    process (a child of a kernel that holds one, a second rank on the same GPU) fails with
    "CUDA-capable device(s) is/are busy or unavailable"."""
    return mode.strip().lower().replace(" ", "_") in ("exclusive_process", "e._process")


def mode_of(gpus: list[Gpu], uuid: str | None) -> str | None:
    """The compute mode of the GPU whose UUID is `uuid`; where the UUID is unknown,
    exclusive-process if any GPU of the node is (the safe answer), else the first one's mode;
    None without GPUs."""
    for gpu in gpus:
        if uuid is not None and gpu.uuid == uuid:
            return gpu.compute_mode
    modes = [g.compute_mode for g in gpus]
    exclusive = [m for m in modes if is_exclusive(m)]
    return exclusive[0] if exclusive else (modes[0] if modes else None)


def index_of(uuid: str | None, gpus: list[Gpu]) -> int | None:
    """nvidia-smi's (and NVML's) index of the GPU with this UUID, or None where it is not
    listed (no nvidia-smi, or no UUID): CUDA's, NVML's and a cgroup-constrained step's indices
    need not agree, so a rank finds the GPU it trains on by UUID."""
    if uuid is None:
        return None
    found = [g.index for g in gpus if g.uuid == uuid]
    return found[0] if found else None


def torch_uuid(properties) -> str | None:
    """A CUDA device's UUID as nvidia-smi writes it (GPU-...), from
    `torch.cuda.get_device_properties(i)`; None where this PyTorch does not report one."""
    uuid = getattr(properties, "uuid", None)
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith("GPU-") else f"GPU-{text}"
