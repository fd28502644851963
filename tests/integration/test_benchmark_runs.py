"""Benchmarks that start processes: DDP scaling with 1 and 2 ranks."""

import json

import pytest

from benchmarks import ddp_scaling


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
