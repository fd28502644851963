"""`course doctor`: what this environment has, checked against what the course and the job need.

Each finding is a row (topic, value, status, advice). Status "error" is blocking (non-zero exit):
the course cannot run correctly here. "warn" deserves attention; "ok" and "info" do not.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import course_utils
from course_utils import hpc
from course_utils.tables import text_table

OK, INFO, WARN, ERROR = "ok", "info", "warn", "error"
KERNEL_NAME = "course"


@dataclass(frozen=True)
class Finding:
    topic: str
    value: str
    status: str = INFO
    advice: str = ""


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def torchvision_pairs(torch_version: str, torchvision_version: str) -> bool:
    """Whether a torchvision release is the one built for a PyTorch release.

    Since PyTorch 2.0 the pairs follow torch 2.N <-> torchvision 0.(N+15), e.g. 2.14 <-> 0.29.
    A mismatched torchvision fails at import with "operator torchvision::nms does not exist".
    """
    t_major, t_minor = _major_minor(torch_version)
    v_major, v_minor = _major_minor(torchvision_version)
    return t_major == 2 and v_major == 0 and v_minor == t_minor + 15


def versions() -> list[Finding]:
    rows = [
        Finding(
            "python",
            platform.python_version(),
            OK if sys.version_info >= (3, 10) else ERROR,
            "" if sys.version_info >= (3, 10) else "the course needs Python 3.10 or newer",
        ),
        pytorch_finding(torch.__version__),
    ]
    try:
        import torchvision

        paired = torchvision_pairs(torch.__version__, torchvision.__version__)
        rows.append(
            Finding(
                "torchvision",
                torchvision.__version__,
                OK if paired else WARN,
                ""
                if paired
                else "not the release built for this PyTorch: "
                "pip install --no-deps the matching torchvision (lesson 00)",
            )
        )
    except Exception as e:  # a mismatched torchvision fails at import with many error types
        rows.append(
            Finding(
                "torchvision",
                f"import failed: {e}",
                ERROR,
                "install the torchvision built for this PyTorch (see lesson 00)",
            )
        )
    rows.append(Finding("cuda (build)", torch.version.cuda or "none (CPU-only build)"))
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    rows.append(Finding("cudnn", str(cudnn) if cudnn else "not available"))
    return rows


def pytorch_finding(version: str, tested: str | None = None) -> Finding:
    """This PyTorch against the one the course is tested with (requirements.txt's pin)."""
    tested = tested or course_utils.TESTED_TORCH
    if version.split("+")[0] == tested:
        return Finding("pytorch", version, OK)
    too_old = _major_minor(version) < (2, 6)
    return Finding(
        "pytorch",
        f"{version} (the course is tested with {tested})",
        ERROR if too_old else WARN,
        ("the course needs PyTorch 2.6 or newer: " if too_old else "lessons run, but outputs "
         "and timings may differ and known problems of this release are not covered: ")
        + f"pip install -r requirements.txt (torch=={tested}) or your centre's matching module",
    )  # fmt: skip


# The NVIDIA driver a CUDA build needs: the minimum for CUDA minor-version compatibility in
# NVIDIA's CUDA toolkit release notes (13.x: 580; 12.x: 525.60.13; 11.x: 450.80.02).
MIN_DRIVER = {13: (580, 0, 0), 12: (525, 60, 13), 11: (450, 80, 2)}


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


def nvidia_driver() -> str | None:
    """The NVIDIA kernel driver's version on this node, or None."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
        if m:
            return m[1]
    except OSError:
        pass
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split()
    return lines[0] if done.returncode == 0 and lines else None


ARCH_NAME = re.compile(r"^(?P<kind>sm|compute)_(?P<major>\d+)(?P<minor>\d)(?P<suffix>[a-z]?)$")


def arch_supported(capability: tuple[int, int], arch_list: list[str]) -> bool:
    """Whether this build has kernels a GPU of `capability` can run.

    A cubin sm_XY runs on GPUs of the same major version X and minor >= Y; an arch-specific
    cubin (sm_90a) only on exactly that GPU; PTX (compute_XY) is JIT-compiled for any GPU >= X.Y.
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
    return [driver] + [
        gpu_finding(
            i, torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i), arch_list
        )
        for i in range(torch.cuda.device_count())
    ]


def threads() -> list[Finding]:
    allocated, torch_threads = hpc.allocated_cpus(), torch.get_num_threads()
    value = f"allocated CPUs {allocated}, torch threads {torch_threads}"
    if torch_threads > allocated:
        return [
            Finding(
                "cpu threads",
                value,
                WARN,
                "more threads than CPUs: call course_utils.hpc.configure_threads() "
                "or set OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK",
            )
        ]
    if torch_threads < allocated:
        return [
            Finding(
                "cpu threads",
                value,
                INFO,
                "fewer threads than allocated CPUs: configure_threads() uses them all",
            )
        ]
    return [Finding("cpu threads", value, OK)]


def precision() -> list[Finding]:
    matmul = torch.backends.cuda.matmul.allow_tf32
    cudnn = torch.backends.cudnn.allow_tf32
    return [
        Finding(
            "tf32",
            f"matmul {matmul}, cudnn {cudnn}, float32 matmul precision "
            f"'{torch.get_float32_matmul_precision()}'",
        )
    ]


def distributed() -> list[Finding]:
    import torch.distributed as dist

    if not dist.is_available():
        return [Finding("distributed", "torch.distributed not built", WARN, "lesson 05 needs it")]
    names = {
        "gloo": dist.is_gloo_available(),
        "nccl": dist.is_nccl_available(),
        "mpi": dist.is_mpi_available(),
    }
    have = ", ".join(n for n, ok in names.items() if ok) or "none"
    status = OK if names["gloo"] or names["nccl"] else WARN
    return [Finding("distributed backends", have, status)]


def data() -> list[Finding]:
    from torchvision.datasets import CIFAR10

    from course_utils.data import data_root

    folder = data_root()
    try:
        CIFAR10(str(folder), train=False, download=False)
    except RuntimeError:
        return [
            Finding(
                "data",
                f"no CIFAR-10 in {folder}: lessons use the synthetic stand-in",
                INFO,
                "run `course data fetch` on a login node for the real images",
            )
        ]
    return [Finding("data", f"CIFAR-10 found in {folder}", OK)]


def kernel() -> list[Finding]:
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        specs = KernelSpecManager().find_kernel_specs()
    except ImportError:
        return [
            Finding(
                "jupyter kernel",
                "jupyter_client not installed",
                WARN,
                "install the course requirements (make lab does)",
            )
        ]
    if KERNEL_NAME in specs:
        return [
            Finding("jupyter kernel", f"'{KERNEL_NAME}' registered at {specs[KERNEL_NAME]}", OK)
        ]
    return [
        Finding(
            "jupyter kernel",
            f"'{KERNEL_NAME}' not registered",
            WARN,
            f"python -m ipykernel install --user --name {KERNEL_NAME} (make lab does it)",
        )
    ]


# The JupyterLab extension of jupyterlab_widgets (its package.json major) -> the ipywidgets major
# it renders: jupyterlab_widgets 3.x ships jupyterlab-manager 5.x (ipywidgets 8), 1.x ships 3.x (7).
WIDGET_EXTENSION = "@jupyter-widgets/jupyterlab-manager"
WIDGET_PAIRS = {5: 8, 3: 7}
_WIDGET_FIX = (
    "pip install jupyterlab_widgets=={v} in the environment that runs the Jupyter "
    "server (on JupyterHub: the centre's), then restart the server"
)


def server_prefix(cmdline: list[str]) -> Path | None:
    """The Python environment of a Jupyter server, from its command line (None if not a server).

    A kernel's parent is the server that started it; in a venv, argv[0] (or a script such as
    jupyterhub-singleuser) lies in <prefix>/bin.
    """
    if not any("jupyter" in Path(arg).name for arg in cmdline[:3]):
        return None
    for arg in cmdline[:3]:
        path = Path(arg)
        if path.is_absolute() and path.parent.name == "bin":
            return path.parent.parent
    return None


def _parent_cmdline() -> list[str]:
    try:
        raw = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()  # Linux; elsewhere: unknown
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def server_labextension_dirs() -> tuple[list[Path], str]:
    """Where the Jupyter server looks for JupyterLab extensions, and which server that is.

    The kernel inherits the server's JUPYTER_PATH and HOME, so the data paths are the same except
    the environment's own share/jupyter: the server's when a server started this kernel, else
    this environment's (as with `make lab`, or `course doctor` in a terminal).
    """
    from jupyter_core.paths import jupyter_path

    own = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
    prefix = server_prefix(_parent_cmdline())
    if prefix is None or prefix.resolve() == Path(sys.prefix).resolve():
        return [Path(d) for d in jupyter_path("labextensions")], "this environment's server"
    dirs = [prefix / "share" / "jupyter" / "labextensions"]
    dirs += [Path(d) for d in jupyter_path("labextensions") if Path(d) != own]
    return dirs, f"server in {prefix}"


def widget_extension_version(dirs: list[Path]) -> str | None:
    """Version of the ipywidgets JupyterLab extension found first in `dirs`, or None."""
    for folder in dirs:
        package = folder / WIDGET_EXTENSION / "package.json"
        if package.is_file():
            return json.loads(package.read_text())["version"]
    return None


def widgets_pair(ipywidgets_version: str, extension_version: str) -> bool:
    """Whether a JupyterLab widget extension renders the widgets of this ipywidgets release."""
    return WIDGET_PAIRS.get(int(extension_version.split(".")[0])) == int(
        ipywidgets_version.split(".")[0]
    )


def widgets() -> list[Finding]:
    try:
        import ipywidgets
    except ImportError:
        return [
            Finding(
                "widgets",
                "ipywidgets not installed",
                WARN,
                "install the course requirements (lesson 02's controls need ipywidgets)",
            )
        ]
    kernel_v = ipywidgets.__version__
    dirs, where = server_labextension_dirs()
    fix = _WIDGET_FIX.format(v="3.0.*" if kernel_v.startswith("8.") else "1.*")
    server_v = widget_extension_version(dirs)
    value = f"ipywidgets {kernel_v}; {where}: "
    if server_v is None:
        return [
            Finding("widgets", value + "no widget extension (controls show as text)", WARN, fix)
        ]
    value += f"{WIDGET_EXTENSION} {server_v}"
    if widgets_pair(kernel_v, server_v):
        return [Finding("widgets", value, OK)]
    return [Finding("widgets", value + " does not render this ipywidgets", WARN, fix)]


def collect() -> list[Finding]:
    rows = []
    for part in (versions, gpus, threads, precision, distributed, data, kernel, widgets):
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
