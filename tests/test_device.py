"""course_utils.device: every branch of the device decision, with GPU counts injected."""

import pytest
import torch

from course_utils.device import local_device, pick_device, plan_device, requires, synchronize


@pytest.mark.parametrize(
    ("local_rank", "local_world_size", "gpus", "device", "shares"),
    [
        (0, 1, 0, "cpu", False),  # a laptop
        (0, 1, 1, "cuda:0", False),  # a one-GPU job
        (3, 4, 4, "cuda:3", False),  # one GPU per local rank
        (1, 2, 8, "cuda:1", False),  # more GPUs than ranks: each rank its own
        (0, 2, 1, "cuda:0", True),  # two ranks, one GPU (the lesson 05 demo on a 1-GPU node)
        (1, 2, 1, "cuda:0", True),
        (3, 4, 2, "cuda:1", True),  # round-robin over the GPUs there are
        (1, 2, 0, "cpu", False),  # CPU ranks never "share" a device
    ],
)
def test_plan_device_for_each_hardware(local_rank, local_world_size, gpus, device, shares):
    plan = plan_device(local_rank, local_world_size, gpus=gpus)
    assert plan.device == torch.device(device)
    assert bool(plan.note) == shares
    if shares:
        assert f"{local_world_size} processes on this node share {gpus} GPU(s)" in plan.note
        assert "gloo" in plan.note


def test_choices_win_over_the_hardware():
    assert plan_device(0, 1, "cpu", gpus=4).device == torch.device("cpu")
    assert plan_device(1, 2, "cuda", gpus=2).device == torch.device("cuda:1")
    assert plan_device(0, 1, None, gpus=0, mps=True).device == torch.device("mps")
    pinned = plan_device(1, 2, "cuda:1", gpus=2)  # every rank on the one named GPU
    assert pinned.device == torch.device("cuda:1") and "share" in pinned.note


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"choice": "cuda:1", "gpus": 1, "source": "COURSE_DEVICE"}, r"COURSE_DEVICE='cuda:1'"),
        ({"choice": "cuda", "gpus": 0}, r"prefer='cuda' asks for a device .* choose 'cpu'"),
        ({"choice": "mps"}, r"0 mps device"),
        ({"local_rank": 2, "local_world_size": 2}, r"local rank 2 of 2 .*LOCAL_RANK"),
        ({"local_rank": 0, "local_world_size": 0}, r"SLURM_LOCALID"),
    ],
)
def test_impossible_requests_name_the_value_and_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_device(**kwargs)


def test_local_device_reads_the_hardware(fake_gpus, capsys):
    fake_gpus(4)
    assert local_device(2, 4) == torch.device("cuda:2")
    fake_gpus(0)
    assert local_device(1, 2) == torch.device("cpu")
    assert capsys.readouterr().out == ""


def test_sharing_is_said_once_per_node(fake_gpus, capsys):
    fake_gpus(1)
    assert local_device(0, 2) == local_device(1, 2) == torch.device("cuda:0")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("2 processes on this node share 1 GPU(s)")


def test_course_device_overrides_prefer_and_hardware(fake_gpus, monkeypatch):
    fake_gpus(2)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert local_device(1, 2, prefer="cuda") == torch.device("cpu")
    monkeypatch.setenv("COURSE_DEVICE", "cuda:5")
    with pytest.raises(ValueError, match=r"COURSE_DEVICE='cuda:5' .*2 cuda device"):
        local_device()


def test_pick_device_is_local_device_of_a_single_process(fake_gpus):
    fake_gpus(3)
    assert pick_device() == local_device(0, 1) == torch.device("cuda:0")
    assert pick_device(prefer="cpu") == torch.device("cpu")


def test_unknown_kind_is_a_value_error():
    with pytest.raises(ValueError, match="'tpu' is not one of"):
        requires("tpu")


def test_requires_cpu_is_silent(capsys):
    assert requires("cpu") is True
    assert capsys.readouterr().out == ""


def test_requires_prints_visible_skip_line(fake_gpus, capsys):
    fake_gpus(1)
    assert requires("cuda", count=2) is False
    assert capsys.readouterr().out == "skipped here: needs 2 CUDA GPUs, found 1\n"
    fake_gpus(0)
    assert requires("cuda") is False
    assert capsys.readouterr().out == "skipped here: needs 1 CUDA GPU, found none\n"


@pytest.mark.gpu
def test_requires_cuda_on_gpu_machine():
    assert requires("cuda") is True
    assert pick_device() == torch.device("cuda:0")
    x = torch.ones(1000, device=pick_device()) * 2
    synchronize("cuda")
    assert x.sum().item() == 2000
