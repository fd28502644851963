import pytest

from course_utils.jobs import train_cifar


def test_runs_on_cpu_and_reports(capsys):
    assert (
        train_cifar.main(["--disable-cuda", "--max-steps", "3", "--no-progress", "--threads", "1"])
        == 0
    )
    out = capsys.readouterr().out
    assert "device cpu, 1 torch threads" in out
    assert "epoch 1: train loss" in out and "test: loss" in out


def test_bad_epochs_is_rejected(capsys):
    with pytest.raises(SystemExit):
        train_cifar.parse_args(["--epochs", "0"])
    assert "--epochs 0: must be at least 1" in capsys.readouterr().err


def test_disable_cuda_wins_over_a_gpu(fake_gpus, capsys):
    fake_gpus(1)  # a GPU node, as far as the device decision can tell
    args = ["--disable-cuda", "--max-steps", "1", "--no-progress", "--threads", "1"]
    assert train_cifar.main(args) == 0
    assert "device cpu" in capsys.readouterr().out
