"""Which lessons take another route on this PyTorch: `course doctor`'s gap rows for a PyTorch
older than the pin (taught in lesson 00; `make test-torch-min` runs every lesson on 2.6.0).

Each probe asks this PyTorch for the feature a lesson detects, the way the lesson does, and says
in one line what the lesson does instead where it is missing. Nothing here is a version table:
a probe that finds the feature says nothing, whatever the version number.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import torch

from course_utils.doctor.findings import INFO, Finding


def rand_long() -> str | None:
    """Lesson 01: torch.rand has no integer version; 2.6 says so with another exception."""
    try:
        torch.rand(1, dtype=torch.long)
    except NotImplementedError:
        return None
    except RuntimeError:
        return (
            "torch.rand(dtype=torch.long) raises RuntimeError here, not NotImplementedError: "
            "the cell catches both"
        )
    return None


def accelerator_name() -> str | None:
    """Lesson 02: torch.accelerator names the build's accelerator even where none is present."""
    if not hasattr(torch, "accelerator"):
        return "no torch.accelerator: the cell lets pick_device() decide"
    if torch.accelerator.is_available():
        return None
    try:
        torch.accelerator.current_accelerator()
    except RuntimeError:
        return (
            "torch.accelerator.current_accelerator() raises where no accelerator is present: "
            "the cell prints that and computes on the CPU"
        )
    return None


def torchscript_warns() -> bool:
    """Whether this PyTorch deprecates TorchScript with a FutureWarning (2.6 does not)."""
    from course_utils import inter_op

    _, note = inter_op.scripted_fork()
    return bool(note)


def interop_note() -> str | None:
    """Lesson 02: the inter-op cell prints TorchScript's deprecation warning."""
    if torchscript_warns():
        return None
    return "TorchScript gives no deprecation warning here: the inter-op cell says so"


def export_notes() -> str | None:
    """Lesson 07: the export helpers turn TorchScript's warnings into one note."""
    if torchscript_warns():
        return None
    return "TorchScript gives no deprecation warning here: the notes name the deprecated calls"


def tf32_settings() -> str | None:
    """Lesson 04: the fp32_precision settings that replace allow_tf32 (the attribute that
    precision.fp32_precision detects; importing precision here would load the benchmark
    utilities, which print a CUDA notice on 2.6)."""
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        return None
    return "no fp32_precision settings: the precision helpers use the legacy TF32 flags"


def fsdp2_on_cpu() -> str | None:
    """Lesson 05: FSDP2 records events on the device's streams, the CPU's included (the check
    jobs/fsdp_demo.py makes before it trains)."""
    from course_utils.distributed import fsdp2_trains_on_cpu

    if fsdp2_trains_on_cpu() is None:
        return None
    return (
        "FSDP2 shards but cannot train on the CPU here (torch.cpu.Stream has no record_event): "
        "the demo says so and skips training"
    )


def flight_recorder() -> str | None:
    """Lesson 09: gloo's flight record and PyTorch's analyser of it."""
    from course_utils.failing import flight_recorder as fr

    missing = []
    if not fr.gloo_dump_available():
        missing.append("no flight-recorder dump for gloo (_dump_fr_trace)")
    if importlib.util.find_spec("torch.distributed.flight_recorder") is None:
        missing.append("no analyser (torch.distributed.flight_recorder)")
    if not missing:
        return None
    return " and ".join(missing) + ": the lesson's flight-recorder cells say so, with no records"


Probe = Callable[[], str | None]
# Lesson -> the probes of what it detects, in lesson order.
PROBES: dict[str, tuple[Probe, ...]] = {
    "01": (rand_long,),
    "02": (accelerator_name, interop_note),
    "04": (tf32_settings,),
    "05": (fsdp2_on_cpu,),
    "07": (export_notes,),
    "09": (flight_recorder,),
}


def other_routes(probes: dict[str, tuple[Probe, ...]] = PROBES) -> dict[str, str]:
    """lesson -> what it does differently on this PyTorch (only the lessons that do)."""
    found = {}
    for lesson, checks in probes.items():
        lines = [line for line in (check() for check in checks) if line]
        if lines:
            found[lesson] = "; ".join(lines)
    return found


def route_findings(routes: dict[str, str]) -> list[Finding]:
    """One row per lesson that takes another route here."""
    return [Finding(f"lesson {lesson}", what, INFO) for lesson, what in routes.items()]
