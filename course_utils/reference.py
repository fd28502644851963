"""Reference results measured on a GPU, and how lessons show them where there is none.

A result is a JSON file in course_utils/reference/ (package data), labelled with what measured it:
device, PyTorch version, date and the course's commit. `make test-gpu` writes them
(`python -m benchmarks --device cuda --out-dir course_utils/reference` and
`python -m course_utils.jobs.reference_gpu`); they are committed, and lessons 03, 04 and 08 show
them, labelled, where their GPU cells are skipped. Nothing is invented: a missing file is said to
be missing.
"""

from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path

import torch

from course_utils import hpc, paths
from course_utils.files import atomic_write_text

MISSING = (
    "no GPU reference recorded yet for {name}: run `make test-gpu` on a GPU machine and commit "
    "course_utils/reference/{name}.json"
)


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU model with the CPUs this process may use."""
    device = torch.device(device)
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


def label(name: str, device) -> dict:
    """Who measured what: the benchmark, device, PyTorch version, date and course commit."""
    device = torch.device(device)
    return {
        "benchmark": name,
        "device": device_name(device),
        "device_type": device.type,
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "commit": paths.commit(),
        "torch_threads": torch.get_num_threads(),
    }


def save(result: dict, path: str | Path) -> Path:
    """Write `result` as JSON, atomically (a reader never sees half a file)."""
    return atomic_write_text(path, json.dumps(result, indent=2) + "\n")


def load(name: str, directory: Path | None = None) -> dict | None:
    """The stored result `name` (<name>.json), or None when none was recorded."""
    path = (directory or paths.REFERENCE_DIR) / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def describe(ref: dict) -> str:
    """The label line printed above every shown reference."""
    commit = f", course commit {ref['commit']}" if ref.get("commit") else ""
    return (
        f"reference result (not measured here): {ref['device']}, PyTorch {ref['torch']}, "
        f"{ref['date']}{commit}"
    )


def show(name: str, section: str | None = None, directory: Path | None = None) -> dict | None:
    """Print the label of reference `name` (and the values of `section`, if given); return the
    result (or that section), or say that none was recorded and return None."""
    ref = load(name, directory)
    if ref is None or (section is not None and section not in ref.get("results", {})):
        print(MISSING.format(name=name))
        return None
    print(describe(ref))
    if section is None:
        return ref
    values = ref["results"][section]
    for key, value in values.items():
        print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    return values
