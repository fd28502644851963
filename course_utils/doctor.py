"""`course doctor`: what this environment has, checked against what the course and the job need
(taught in lesson 00, which reads the report line by line).

Each finding is a row (topic, value, status, advice); status "error" is blocking (exit code 1),
"warn" deserves attention, "ok" and "info" do not. The rows come from one module per subject:
  doctor_versions  Python, PyTorch against the pin, torchvision against PyTorch, CUDA and cuDNN
  doctor_routes    which lessons take another route on a PyTorch older than the pin
  doctor_gpu       the NVIDIA driver against the CUDA build, each GPU against the build's archs
  doctor_slurm     the Slurm job this process is in, and what would break a launch from here
  doctor_runtime   CPU threads, precision flags, distributed backends, data
  doctor_jupyter   the course kernel, and the widget extension of the server that started it
This module collects and prints them; the names lessons and checkers use are importable here.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import torch

from course_utils import doctor_routes
from course_utils.doctor_findings import ERROR, INFO, OK, WARN, Finding
from course_utils.doctor_gpu import (
    ARCH_NAME,
    MIN_DRIVER,
    arch_supported,
    driver_finding,
    gpu_finding,
    gpus,
    nvidia_driver,
)
from course_utils.doctor_jupyter import (
    KERNEL_NAME,
    WIDGET_EXTENSION,
    WIDGET_PAIRS,
    kernel,
    server_labextension_dirs,
    server_prefix,
    widget_extension_version,
    widgets,
    widgets_pair,
)
from course_utils.doctor_runtime import data, distributed, precision, threads
from course_utils.doctor_slurm import slurm_job
from course_utils.doctor_versions import (
    builds,
    older_than_pin,
    python_finding,
    pytorch_finding,
    torchvision_finding,
    torchvision_pairs,
)
from course_utils.tables import text_table

# The names this module had before it was split: lessons 00 and 07, the checkers and scripts
# use them from here.
__all__ = [
    "ARCH_NAME", "ERROR", "INFO", "KERNEL_NAME", "MIN_DRIVER", "OK", "WARN", "WIDGET_EXTENSION",
    "WIDGET_PAIRS", "Finding", "arch_supported", "collect", "data", "distributed",
    "driver_finding", "format_table", "gpu_finding", "gpus", "kernel", "main", "nvidia_driver",
    "precision", "pytorch_finding", "server_labextension_dirs", "server_prefix", "slurm_job",
    "threads", "torchvision_pairs", "versions", "widget_extension_version", "widgets",
    "widgets_pair",
]  # fmt: skip


def versions() -> list[Finding]:
    """Python, PyTorch (with the lessons that take another route on an older one), torchvision,
    and what PyTorch was built with."""
    routes = doctor_routes.other_routes() if older_than_pin(torch.__version__) else {}
    return [
        python_finding(),
        pytorch_finding(torch.__version__, other_routes=len(routes)),
        *doctor_routes.route_findings(routes),
        torchvision_finding(),
        *builds(),
    ]


def collect() -> list[Finding]:
    rows = []
    for part in (versions, gpus, slurm_job, threads, precision, distributed, data, kernel, widgets):
        rows.extend(part())
    return rows


def format_table(rows: list[Finding]) -> str:
    width = max(len(r.topic) for r in rows)
    lines = []
    for r in rows:
        lines.append([r.topic, f"[{r.status:^5}]", r.value])
        if r.advice:  # a note under its row, indented past the topic and status
            lines.append(f"{'':<{width}}           -> {r.advice}")
    return text_table(["topic", "status", "value"], lines, right=())


def main(as_json: bool = False) -> int:
    """Print the report; exit code 1 when any finding is blocking."""
    rows = collect()
    if as_json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        print(format_table(rows))
    return 1 if any(r.status == ERROR for r in rows) else 0
