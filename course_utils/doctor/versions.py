"""`course doctor`'s versions: Python, PyTorch against the pin, torchvision against PyTorch, and
the CUDA and cuDNN this PyTorch was built with (taught in lesson 00)."""

from __future__ import annotations

import platform
import re
import sys

import torch

import course_utils
from course_utils.doctor.findings import ERROR, OK, WARN, Finding

# The oldest PyTorch the course supports (pyproject.toml: torch>=2.6; `make test-torch-min`).
OLDEST_TORCH = (2, 6)


def major_minor(version: str) -> tuple[int, int]:
    """(2, 14) from "2.14.1+cu130"."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def torchvision_for(torch_version: str) -> str | None:
    """The torchvision series built for a PyTorch release: "0.29" for "2.14.1+cu130".

    Since PyTorch 2.0 the pairs follow torch 2.N <-> torchvision 0.(N+15); None before 2.0.
    container/ngc.def asks it for an image that lacks torchvision.
    """
    major, minor = major_minor(torch_version)
    return f"0.{minor + 15}" if major == 2 else None


def torchvision_pairs(torch_version: str, torchvision_version: str) -> bool:
    """Whether a torchvision release is the one built for a PyTorch release (`torchvision_for`).
    A mismatched torchvision fails at import with "operator torchvision::nms does not exist".
    """
    pair = torchvision_for(torch_version)
    return pair is not None and major_minor(torchvision_version) == major_minor(pair)


def supported_torch(version: str) -> bool:
    """Whether the course supports this PyTorch: OLDEST_TORCH (2.6) or later.

    A pre-release counts as before its release, as pip ranks it: NGC's images carry snapshots of
    PyTorch's main branch, and "2.6.0a0+ecf3bae" was taken while 2.6 was still being written
    (2.7.0a0 came after 2.6's release branch). Lesson 00 picks an NGC tag by this rule."""
    release = major_minor(version)
    if release != OLDEST_TORCH:
        return release > OLDEST_TORCH
    return re.search(r"\d(a|b|rc|\.?dev)\d*", version.split("+")[0]) is None


def older_than_pin(version: str, tested: str | None = None) -> bool:
    """Whether `version` is an older release than the one the course is tested with."""
    return _release(version) < _release(tested or course_utils.TESTED_TORCH)


def _release(version: str) -> tuple[int, ...]:
    """(2, 6, 0) from "2.6.0+cu124"; a pre-release ("2.15.0a0") counts as its release."""
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])


def pytorch_finding(version: str, tested: str | None = None, other_routes: int = 0) -> Finding:
    """This PyTorch against the one the course is tested with (requirements.txt's pin).

    other_routes: how many lessons take another route on this release (doctor_routes), named
    in the advice so the reader looks at the rows that list them."""
    tested = tested or course_utils.TESTED_TORCH
    if version.split("+")[0] == tested:
        return Finding("pytorch", version, OK)
    too_old = not supported_torch(version)
    if too_old:
        why = f"the course needs PyTorch {'.'.join(map(str, OLDEST_TORCH))} or newer: "
    elif other_routes:
        why = (
            f"older than the pin: {other_routes} lesson(s) take another route here (the "
            "'lesson NN' rows); outputs and timings may differ: "
        )
    else:
        why = (
            "lessons run, but outputs and timings may differ and known problems of this "
            "release are not covered: "
        )
    return Finding(
        "pytorch",
        f"{version} (the course is tested with {tested})",
        ERROR if too_old else WARN,
        why + f"pip install -r requirements.txt (torch=={tested}) or your centre's matching module",
    )


def python_finding() -> Finding:
    ok = sys.version_info >= (3, 10)
    return Finding(
        "python",
        platform.python_version(),
        OK if ok else ERROR,
        "" if ok else "the course needs Python 3.10 or newer",
    )


def torchvision_finding() -> Finding:
    try:
        import torchvision
    except Exception as e:  # a mismatched torchvision fails at import with many error types
        return Finding(
            "torchvision",
            f"import failed: {e}",
            ERROR,
            "install the torchvision built for this PyTorch (see lesson 00)",
        )
    paired = torchvision_pairs(torch.__version__, torchvision.__version__)
    return Finding(
        "torchvision",
        torchvision.__version__,
        OK if paired else WARN,
        ""
        if paired
        else "not the release built for this PyTorch: "
        "pip install --no-deps the matching torchvision (lesson 00)",
    )


def builds() -> list[Finding]:
    """The CUDA and cuDNN this PyTorch was built with."""
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return [
        Finding("cuda (build)", torch.version.cuda or "none (CPU-only build)"),
        Finding("cudnn", str(cudnn) if cudnn else "not available"),
    ]
