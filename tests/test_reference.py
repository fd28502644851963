"""course_utils.reference: results shown with their label when stored, never invented when not."""

import json
import re

import pytest
import torch

from course_utils import reference


def test_missing_reference_says_so(tmp_path, capsys):
    assert reference.load("gpu", tmp_path) is None
    assert reference.show("gpu", "lesson03", directory=tmp_path) is None
    assert "no GPU reference recorded yet for gpu" in capsys.readouterr().out


def test_stored_reference_is_printed_with_its_label(tmp_path, capsys):
    ref = {
        "device": "NVIDIA A100",
        "torch": "2.11.0",
        "date": "2026-01-02",
        "commit": "abc1234",
        "results": {"lesson04_tf32": {"tf32 relative error": 0.0021, "matmul n": 4096}},
    }
    reference.save(ref, tmp_path / "gpu.json")
    values = reference.show("gpu", "lesson04_tf32", directory=tmp_path)
    out = capsys.readouterr().out
    assert "NVIDIA A100, PyTorch 2.11.0, 2026-01-02, course commit abc1234" in out
    assert "tf32 relative error: 0.0021" in out
    assert values == ref["results"]["lesson04_tf32"]
    assert reference.show("gpu", "lesson99", directory=tmp_path) is None  # no such section


def test_label_names_device_version_date_and_commit(fake_commands, monkeypatch):
    monkeypatch.delenv("COURSE_COMMIT", raising=False)
    fake_commands({"git rev-parse": "abc1234\n"})
    label = reference.label("matmul", torch.device("cpu"))
    assert label["benchmark"] == "matmul" and label["device_type"] == "cpu"
    assert label["torch"] == torch.__version__ and "CPUs)" in label["device"]
    assert label["commit"] == "abc1234"


@pytest.mark.parametrize(
    "name", ["gpu", "bench_train_throughput", "bench_h2d_bandwidth", "bench_matmul"]
)
def test_the_committed_gpu_references_are_labelled(name):
    ref = reference.load(name)
    assert ref is not None, f"course_utils/reference/{name}.json is committed"
    # recorded on a GPU node by `make test-gpu` (an H100; lesson 08's tuning later on an H200)
    assert ref["device"].startswith("NVIDIA ") and ref["torch"].startswith("2.")
    assert ref.get("device_type", "cuda") == "cuda"
    assert len(ref["commit"]) >= 7 and re.fullmatch(r"\d{4}-\d\d-\d\d", ref["date"])


def test_save_is_atomic_json(tmp_path):
    path = reference.save({"a": 1.5}, tmp_path / "sub" / "r.json")
    assert json.loads(path.read_text()) == {"a": 1.5}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]
