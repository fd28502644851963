"""`course doctor`: what this environment has, checked against what the course and the job need
(taught in lesson 00, which reads the report line by line).

Each finding is a row (topic, value, status, advice); status "error" is blocking (exit code 1),
"warn" deserves attention, "ok" and "info" do not. The rows come from one module per subject:
  versions  Python, PyTorch against the pin, torchvision against PyTorch, CUDA and cuDNN
  routes    which lessons take another route on a PyTorch older than the pin
  gpu       the NVIDIA driver against the CUDA build, each GPU against the build's archs
  slurm     the Slurm job this process is in, and what would break a launch from here
  runtime   CPU threads, precision flags, distributed backends, data
  jupyter   the course kernel, and the widget extension of the server that started it
  container the container image this runs in (which runtime, where its Python's packages are),
            and whether the node's GPU driver reached inside
This module collects and prints them; lessons and checkers import each name from its own module.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import torch

from course_utils.doctor import routes
from course_utils.doctor.container import container
from course_utils.doctor.findings import ERROR, Finding
from course_utils.doctor.gpu import gpus
from course_utils.doctor.jupyter import kernel, widgets
from course_utils.doctor.runtime import data, distributed, precision, threads
from course_utils.doctor.slurm import slurm_job
from course_utils.doctor.versions import (
    builds,
    older_than_pin,
    python_finding,
    pytorch_finding,
    torchvision_finding,
)
from course_utils.tables import text_table


def versions() -> list[Finding]:
    """Python, PyTorch (with the lessons that take another route on an older one), torchvision,
    and what PyTorch was built with."""
    other = routes.other_routes() if older_than_pin(torch.__version__) else {}
    return [
        python_finding(),
        pytorch_finding(torch.__version__, other_routes=len(other)),
        *routes.route_findings(other),
        torchvision_finding(),
        *builds(),
    ]


def collect() -> list[Finding]:
    rows = []
    parts = (versions, gpus, container, slurm_job, threads, precision, distributed, data, kernel)
    for part in (*parts, widgets):
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
