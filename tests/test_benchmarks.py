"""benchmarks/: each runs with tiny sizes, prints a table, and saves labelled JSON whose ratios
are computed from the figures it measured."""

import json

import pytest
import torch

from benchmarks import __main__ as run_all
from benchmarks import common, ddp_scaling, h2d_bandwidth, matmul, train_throughput
from course_utils import speed, throughput

LABEL = {"benchmark", "device", "device_type", "torch", "date", "torch_threads"}


def _read(path):
    result = json.loads(path.read_text())
    assert LABEL <= set(result) and result["torch"] == torch.__version__
    return result


@pytest.fixture(autouse=True)
def commit(request, fake_commands, monkeypatch):
    """Results are labelled with the course's commit: git answers here, without running. A test
    marked gpu runs on a GPU node, where nvidia-smi really answers: the label comes from
    COURSE_COMMIT there."""
    if request.node.get_closest_marker("gpu"):
        monkeypatch.setenv("COURSE_COMMIT", "abc1234")
        return
    monkeypatch.delenv("COURSE_COMMIT", raising=False)
    fake_commands({"git rev-parse": "abc1234\n"})


class _FakeBench:
    """Images/s of a made-up machine: larger batches x2 each, channels_last x1.5, the rest
    nothing; the real measurement (DataLoader workers included) runs in tests/integration."""

    def __init__(self, dataset, device, seconds, warmup):
        self.seconds, self.closed = seconds, False

    def warm(self, recipe):
        pass

    def __call__(self, recipe):
        rate = 100.0 * {128: 1, 64: 2}[recipe.batch_size]
        return rate * (1.5 if recipe.channels_last else 1)

    def close(self):
        self.closed = True


def test_train_throughput(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(throughput, "Bench", _FakeBench)
    out = tmp_path / "t.json"
    args = ["--device", "cpu", "--seconds", "0.01", "--budget", "1", "--dataset-size", "256"]
    args += ["--batch-sizes", "64", "--compile", "no", "--out", str(out)]
    assert train_throughput.main(args) == 0
    r = _read(out)
    assert r["benchmark"] == "train_throughput" and r["commit"] == "abc1234"
    assert r["tune_method"] == speed.TUNE_METHOD  # a plot tells it from the older records
    assert r["settings"]["seconds_per_measurement"] == 0.01
    assert all("best_per_second" in s and "retried" in s for s in r["steps"])
    assert r["steps"][0]["step"] == "baseline (documentation script)"
    kept = [s["step"] for s in r["steps"] if s["kept"]]
    assert kept == ["baseline (documentation script)", "batch size 64", "channels_last"]
    assert r["steps"][1]["ratios"] == [2.0] * 8 and r["steps"][1]["verdict"] == "faster"
    assert [s["step"] for s in r["steps"] if s["images_per_second"] is None] == [
        "pinned memory, non_blocking",
        "TF32 and cudnn.benchmark",
    ]
    assert r["tuned_changes"] == {"batch_size": 64, "channels_last": True}
    assert (r["naive_images_per_second"], r["tuned_images_per_second"]) == (100.0, 300.0)
    assert r["speedup"] == 3.0 and r["speedup_interval"] == [3.0, 3.0]
    assert (r["speedup_pairs"], r["speedup_verdict"]) == (8, "faster")
    assert r["naive_recipe"]["batch_size"] == 128
    printed = capsys.readouterr().out
    assert "naive against tuned, in pairs: 3.00x (99% interval 3.00-3.00x, 8 pairs): faster" in (
        printed
    )
    assert "medians: naive 100 images/s, tuned 300 images/s" in printed


def test_matmul_ratios_and_peak(tmp_path):
    out = tmp_path / "m.json"
    args = [
        "--device",
        "cpu",
        "--n",
        "64",
        "--min-run-time",
        "0.02",
        "--out",
        str(out),
        "--peak",
        "1",
        "2",
        "4",
    ]
    assert matmul.main(args) == 0
    r = _read(out)
    rows = {row["mode"]: row for row in r["rows"]}
    assert set(rows) == {"fp32", "tf32", "bf16"}
    for mode, peak in (("fp32", 1), ("tf32", 2), ("bf16", 4)):
        assert rows[mode]["speedup vs fp32"] == pytest.approx(
            rows[mode]["TFLOP/s"] / rows["fp32"]["TFLOP/s"]
        )
        assert rows[mode]["% of peak"] == pytest.approx(100 * rows[mode]["TFLOP/s"] / peak)


def test_matmul_peak_table():
    assert matmul.peak_for("NVIDIA H100 80GB HBM3")["bf16"] == 989.4
    assert matmul.peak_for("NVIDIA H100 PCIe")["fp32"] == 51.2
    assert matmul.peak_for("AMD EPYC (2 CPUs)") is None


def test_h2d_needs_a_gpu(fake_gpus, tmp_path, capsys):
    fake_gpus(0)
    out = tmp_path / "h.json"
    assert h2d_bandwidth.main(["--device", "cpu", "--out", str(out)]) == 2
    assert "skipped: needs a CUDA GPU" in capsys.readouterr().err
    assert not out.exists()


def test_pcie_peak():
    assert h2d_bandwidth.pcie_peak_gbs(5, 16) == pytest.approx(63.0, abs=0.01)
    assert h2d_bandwidth.pcie_peak_gbs(4, 16) == pytest.approx(31.5, abs=0.01)
    with pytest.raises(ValueError, match="PCIe generation 9 x16"):
        h2d_bandwidth.pcie_peak_gbs(9, 16)


def test_ddp_parse_throughput():
    text = "epoch 1: ...\nthroughput: 1,234.5 images/s with 2 processes (617 per process)\n"
    assert ddp_scaling.parse_throughput(text) == 1234.5
    with pytest.raises(ValueError, match="no 'throughput: ... images/s' line"):
        ddp_scaling.parse_throughput("rank 0 crashed\n")


def test_run_all_writes_references_and_reports_skips(tmp_path, monkeypatch):
    calls = []

    def fake_main(name, code):
        def main(argv):
            calls.append((name, argv))
            return code

        return main

    monkeypatch.setattr(matmul, "main", fake_main("matmul", 0))
    monkeypatch.setattr(h2d_bandwidth, "main", fake_main("h2d", 2))
    code = run_all.main(
        ["--device", "cpu", "--out-dir", str(tmp_path), "--only", "matmul", "h2d_bandwidth"]
    )
    assert code == 2  # a skipped benchmark: the run was not complete
    assert calls[0] == ("matmul", ["--device", "cpu", "--out", str(tmp_path / "bench_matmul.json")])


def test_unavailable_device_is_a_usage_error(fake_gpus):
    fake_gpus(0)
    with pytest.raises(SystemExit) as e:
        matmul.main(["--device", "cuda"])
    assert e.value.code == 2


def test_table_aligns_numbers_right():
    text = common.table([{"a": "x", "b": 1234.5}, {"a": "long", "b": None}], ["a", "b"])
    lines = text.splitlines()
    assert lines[1].endswith("1,234.5") and lines[2].startswith("long")


@pytest.mark.gpu
def test_h2d_on_gpu(tmp_path):
    out = tmp_path / "h.json"
    assert h2d_bandwidth.main(["--sizes-mb", "1", "8", "--out", str(out)]) == 0
    r = _read(out)
    assert r["device_type"] == "cuda" and len(r["rows"]) == 2
    row = r["rows"][0]
    assert row["pinned / pageable"] == pytest.approx(row["pinned GB/s"] / row["pageable GB/s"])
