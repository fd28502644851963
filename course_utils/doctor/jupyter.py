"""`course doctor`'s Jupyter rows: whether the course kernel is registered, and whether the
Jupyter server that started this kernel has the widget extension that pairs with the kernel's
ipywidgets (taught in lesson 00; lesson 02's controls need it).
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path

from course_utils.doctor.findings import OK, WARN, Finding

KERNEL_NAME = "course"


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

    # This environment's own data folder: sys.prefix in a venv; outside one, where pip put the
    # packages' data (/usr/local on Debian's Python, as in the course's container image).
    own = {
        Path(folder) / "share" / "jupyter" / "labextensions"
        for folder in (sys.prefix, sysconfig.get_paths()["data"])
    }
    prefix = server_prefix(_parent_cmdline())
    if prefix is None or prefix.resolve() == Path(sys.prefix).resolve():
        return [Path(d) for d in jupyter_path("labextensions")], "this environment's server"
    dirs = [prefix / "share" / "jupyter" / "labextensions"]
    dirs += [Path(d) for d in jupyter_path("labextensions") if Path(d) not in own]
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
