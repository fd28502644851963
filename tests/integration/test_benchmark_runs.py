"""Benchmarks that start processes: DDP scaling with 1 and 2 ranks, and the tuning of training
throughput measured for real (its DataLoader workers are processes)."""

import json

import pytest
import torch

from benchmarks import ddp_scaling, train_throughput
from course_utils import speed


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


def test_train_throughput_measured_for_real():
    """Every tuning step measured on this CPU, DataLoader workers (processes) included; the
    command line and the saved file are tested with injected rates in tests/test_benchmarks.py."""
    r = train_throughput.run(
        torch.device("cpu"),
        seconds=0.02,
        budget=0.5,
        compile=False,
        batch_sizes=(64,),
        dataset_size=256,
    )
    assert r["torch"] == torch.__version__ and r["device_type"] == "cpu"
    measured = [s for s in r["steps"] if s["images_per_second"] is not None]
    first_pass = [s["step"] for s in measured if not s["retried"]]  # pinned memory, TF32: skipped
    assert len(first_pass) == 6 and first_pass[2].endswith("DataLoader workers"), first_pass
    assert all(s["step"].endswith("(re-tried)") for s in measured if s["retried"])
    assert r["tune_method"] == speed.TUNE_METHOD
    assert all(s["images_per_second"] > 0 for s in measured)
    assert all(s["ratios"] for s in measured[1:])  # each verdict from its pairs
    naive, tuned = r["naive_images_per_second"], r["tuned_images_per_second"]
    assert naive > 0 and tuned > 0 and r["speedup"] > 0 and r["speedup_pairs"] >= 1
