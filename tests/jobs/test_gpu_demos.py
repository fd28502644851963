"""Where lesson 03's child-process GPU demos run: a pure rule of the GPU's compute mode, tested
with nvidia-smi's answers injected (exclusive-process mode, which many centres set, refuses a
second process a context while the kernel holds one)."""

import sys
from pathlib import Path

import pytest

from course_utils import nvidia
from course_utils.jobs import gpu_demos

GPUS = nvidia.parse_gpus(
    "0, GPU-1a2b3c4d-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3, Exclusive_Process\n"
    "1, GPU-9f8e7d6c-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3, Default\n"
)


@pytest.mark.parametrize(
    ("mode", "held", "child"),
    [
        ("Default", True, True),
        ("Default", False, True),
        ("Exclusive_Process", False, True),  # nothing holds the GPU yet: a child may take it
        ("Exclusive_Process", True, False),
        ("E. Process", True, False),  # nvidia-smi's summary table's short form
        ("Prohibited", False, False),
        (None, True, True),  # no nvidia-smi: try, and let the child say what it found
    ],
)
def test_a_child_runs_unless_the_gpu_is_exclusive_and_the_kernel_holds_it(mode, held, child):
    assert gpu_demos.route(mode, held).child is child


def test_the_skip_says_why_and_what_to_do_instead():
    why = gpu_demos.route("Exclusive_Process", kernel_has_context=True).why
    assert why.startswith("skipped here: the GPU's compute mode is Exclusive_Process")
    assert "busy or unavailable" in why and "shutting this kernel down" in why
    assert gpu_demos.route("Default", True).why == (
        "in a child process: compute mode Default, this kernel holds a context"
    )


def test_a_demo_runs_as_a_module_with_its_setting_added(fake_commands):
    python = Path(sys.executable).name
    fake = fake_commands({f"{python} -m course_utils.jobs.gpu_demos launch-error": "surfaced\n"})
    out = gpu_demos.in_child("launch-error", CUDA_LAUNCH_BLOCKING="1")
    assert out == "surfaced"
    assert fake.calls[0][1:] == ("-m", "course_utils.jobs.gpu_demos", "launch-error")
    assert fake.envs[0]["CUDA_LAUNCH_BLOCKING"] == "1" and "PATH" in fake.envs[0]
