"""`course doctor`: what this environment has, checked against what the course and the job need.

Each finding is a row (topic, value, status, advice). Status "error" is blocking (non-zero exit):
the course cannot run correctly here. "warn" deserves attention; "ok" and "info" do not.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

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
        Finding("pytorch", torch.__version__, OK),
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


def gpus() -> list[Finding]:
    if not torch.cuda.is_available():
        return [
            Finding(
                "gpu",
                "none visible (torch.cuda.is_available() is False)",
                INFO,
                "fine for the CPU lessons; on a cluster ask for one with --gres=gpu:1",
            )
        ]
    arch_list = torch.cuda.get_arch_list()
    rows = []
    for i in range(torch.cuda.device_count()):
        cap = torch.cuda.get_device_capability(i)
        name = torch.cuda.get_device_name(i)
        value = f"{name}, compute capability {cap[0]}.{cap[1]}"
        if arch_supported(cap, arch_list):
            rows.append(Finding(f"gpu {i}", value, OK))
        else:
            rows.append(
                Finding(
                    f"gpu {i}",
                    value,
                    ERROR,
                    f"this PyTorch has kernels for {', '.join(arch_list)} only: expect "
                    "'no kernel image "
                    "is available for execution on the device'; install a build that includes "
                    f'sm_{cap[0]}{cap[1]} (or build with TORCH_CUDA_ARCH_LIST="{cap[0]}.{cap[1]}")',
                )
            )
    return rows


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
