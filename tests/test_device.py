import pytest
import torch

from course_utils.device import pick_device, requires, synchronize


def test_pick_device_defaults_to_best_available(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if expected == "cpu" and torch.backends.mps.is_available():
        expected = "mps"
    assert pick_device() == torch.device(expected)


def test_env_overrides_prefer(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert pick_device(prefer="cuda") == torch.device("cpu")


def test_prefer_is_used_without_env(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    assert pick_device(prefer="cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_unavailable_choice_names_value_and_fix(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cuda:1")
    with pytest.raises(
        ValueError, match=r"COURSE_DEVICE='cuda:1' asks for a device .* choose 'cpu'"
    ):
        pick_device()


def test_unknown_kind_is_a_value_error():
    with pytest.raises(ValueError, match="'tpu' is not one of"):
        requires("tpu")


def test_requires_cpu_is_silent(capsys):
    assert requires("cpu") is True
    assert capsys.readouterr().out == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_requires_prints_visible_skip_line(capsys):
    assert requires("cuda", count=2) is False
    assert capsys.readouterr().out == "skipped here: needs 2 CUDA GPUs, found none\n"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_requires_cuda_on_gpu_machine(capsys):
    assert requires("cuda") is True
    assert pick_device() == torch.device("cuda")
    synchronize("cuda")
