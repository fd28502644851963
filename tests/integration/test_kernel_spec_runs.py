"""A kernel registered with `course kernel` starts with the module environment it carries, as a
hub starts it: from kernel.json alone, in an environment without the module's variables."""

import subprocess
import sys

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel

from course_utils import kernel_spec


def test_the_kernel_sees_the_modules_library_path(tmp_path, monkeypatch):
    shell = {"LD_LIBRARY_PATH": "/apps/cuda/12.6/lib64", "PATH": "/usr/bin:/bin"}
    folder = kernel_spec.install("course-test", "course test", str(tmp_path), environ=shell)
    assert folder == tmp_path / "share" / "jupyter" / "kernels" / "course-test"
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)  # the hub's own environment has none
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    assert "course-test" in KernelSpecManager().find_kernel_specs()
    manager, client = start_new_kernel(kernel_name="course-test")
    try:
        seen = []
        code = "import os, sys; print(os.environ.get('LD_LIBRARY_PATH'), sys.executable)"
        client.execute_interactive(code, output_hook=lambda m: seen.append(m), timeout=60)
        text = "".join(m["content"].get("text", "") for m in seen if m["msg_type"] == "stream")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert text.split() == ["/apps/cuda/12.6/lib64", sys.executable]


def test_course_kernel_from_the_command_line(tmp_path):
    course = [sys.executable, "-m", "course_utils.cli", "kernel", "--name", "c2"]
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/apps/mpi/lib"}
    done = subprocess.run(
        [*course, "--prefix", str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "it carries LD_LIBRARY_PATH, PATH from this shell" in done.stdout
    spec = (tmp_path / "share" / "jupyter" / "kernels" / "c2" / "kernel.json").read_text()
    assert '"LD_LIBRARY_PATH": "/apps/mpi/lib"' in spec
