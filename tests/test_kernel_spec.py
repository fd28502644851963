"""kernel_spec: a hub's kernel carries what `module load` set (the kernel's run: integration)."""

from course_utils import kernel_spec


def test_the_spec_carries_the_module_environment_of_the_shell():
    shell = {
        "LD_LIBRARY_PATH": "/apps/cuda/12.6/lib64:/apps/cudnn/9/lib",
        "PATH": "/apps/python/3.11/bin:/usr/bin",
        "LOADEDMODULES": "python/3.11:cuda/12.6",
        "HOME": "/home/ann",  # not a module's: the hub sets its own
        "CPATH": "",  # empty: nothing to carry
    }
    spec = kernel_spec.kernel_spec("/home/ann/venvs/course/bin/python", shell)
    assert spec["argv"][:3] == ["/home/ann/venvs/course/bin/python", "-m", "ipykernel_launcher"]
    assert spec["env"] == {
        "LD_LIBRARY_PATH": "/apps/cuda/12.6/lib64:/apps/cudnn/9/lib",
        "PATH": "/apps/python/3.11/bin:/usr/bin",
        "LOADEDMODULES": "python/3.11:cuda/12.6",
    }
    assert spec["display_name"] == "PyTorch on HPC (course)"
