"""Benchmarks that start processes: DDP scaling with 1 and 2 ranks, and the tuning of training
throughput measured for real (its DataLoader workers are processes)."""

import json

import pytest
import torch

from benchmarks import ddp_scaling, train_throughput


def _read(path):
    return json.loads(path.read_text())


def test_ddp_scaling_one_vs_two_processes(tmp_path):
    out = tmp_path / "d.json"
    args = ["--device", "cpu", "--images", "128", "--epochs", "1", "--out", str(out)]
    assert ddp_scaling.main(args) == 0
    r = _read(out)
    one, two = (row["images/s"] for row in r["rows"])
    assert [row["processes"] for row in r["rows"]] == [1, 2] and one > 0 and two > 0
    assert r["speedup"] == pytest.approx(two / one)
    assert r["scaling_efficiency"] == pytest.approx(two / (2 * one))


def test_train_throughput_measured(tmp_path, capsys):
    out = tmp_path / "t.json"
    args = [
        "--device",
        "cpu",
        "--images",
        "64",
        "--repeats",
        "1",
        "--dataset-size",
        "256",
        "--batch-sizes",
        "64",
        "--compile",
        "no",
        "--pairs",
        "1",
        "--out",
        str(out),
    ]
    assert train_throughput.main(args) == 0
    r = _read(out)
    assert r["torch"] == torch.__version__
    assert r["benchmark"] == "train_throughput" and r["device_type"] == "cpu"
    assert r["steps"][0]["step"] == "baseline (documentation script)"
    measured = [s for s in r["steps"] if s["images_per_second"] is not None]
    assert len(measured) >= 5 and all(s["images_per_second"] > 0 for s in measured)
    assert [s["step"] for s in r["steps"] if s["images_per_second"] is None] == [
        "pinned memory, non_blocking",
        "TF32 and cudnn.benchmark",
    ]
    naive, tuned = r["naive_images_per_second"], r["tuned_images_per_second"]
    assert r["speedup"] == pytest.approx(tuned / naive)
    assert r["naive_recipe"]["batch_size"] == 128 and not r["settings"]["compile"]
    assert "side by side" in capsys.readouterr().out
