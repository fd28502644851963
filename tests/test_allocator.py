"""The cuBLAS workspace rule: PyTorch's defaults per GPU generation and the variable's format."""

import os

import pytest
import torch

from course_utils.async_gpu.allocator import (
    cublas_workspace_bytes,
    default_workspace_config,
    workspace_config_bytes,
)

MIB = 2**20


@pytest.mark.parametrize(
    ("capability", "mib"),
    [((7, 0), 8.125), ((8, 0), 8.125), ((8, 9), 8.125), ((9, 0), 32), ((10, 0), 32)],
)
def test_default_workspace_by_gpu_generation(capability, mib):
    assert cublas_workspace_bytes(capability) == mib * MIB


@pytest.mark.parametrize(
    ("config", "kib"),
    [(":4096:8", 32768), (":4096:2:16:8", 8320), (":16:8", 128), (":0:0", 0)],
)
def test_config_is_size_kib_times_count_summed(config, kib):
    assert workspace_config_bytes(config) == kib * 1024
    assert cublas_workspace_bytes((9, 0), config) == kib * 1024  # the variable wins


def test_pytorch_documents_the_pre_hopper_default():
    assert default_workspace_config((8, 0)) == ":4096:2:16:8"  # PyTorch's CUDA notes' example


@pytest.mark.parametrize("config", ["4096:8", ":4096", "4096", ":4096:8 junk"])
def test_a_malformed_config_is_refused_with_the_format(config):
    with pytest.raises(ValueError, match=r"CUBLAS_WORKSPACE_CONFIG=.* :SIZE:COUNT pairs"):
        workspace_config_bytes(config)


@pytest.mark.gpu
def test_a_matmul_allocates_the_workspace_the_rule_predicts():
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is None:
        pytest.skip("this PyTorch has no _cuda_clearCublasWorkspaces")
    torch.cuda.synchronize()
    clear()
    before = torch.cuda.memory_allocated()
    a = torch.randn(256, 256, device="cuda")
    (a @ a).sum().item()
    grown = torch.cuda.memory_allocated() - before - a.nbytes  # the products were freed
    config = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    want = cublas_workspace_bytes(torch.cuda.get_device_capability(), config)
    assert abs(grown - want) < 1 * MIB, (grown, want)
