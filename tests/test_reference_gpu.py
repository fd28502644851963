"""Reference GPU results: shown with their label when stored, never invented when not."""

import json

import pytest
import torch

from course_utils import reference_gpu
from course_utils.reference_gpu import load_reference, show_reference


def test_missing_reference_says_so(tmp_path, capsys):
    assert load_reference("gpu", tmp_path) is None
    show_reference("lesson03", directory=tmp_path)
    assert "no reference result recorded yet" in capsys.readouterr().out


def test_stored_reference_is_printed_with_its_label(tmp_path, capsys):
    ref = {
        "device": "NVIDIA A100",
        "torch": "2.11.0",
        "date": "2026-01-02",
        "results": {"lesson04_tf32": {"tf32 relative error": 0.0021, "matmul n": 4096}},
    }
    (tmp_path / "gpu.json").write_text(json.dumps(ref))
    show_reference("lesson04_tf32", directory=tmp_path)
    out = capsys.readouterr().out
    assert "NVIDIA A100, PyTorch 2.11.0, 2026-01-02" in out
    assert "tf32 relative error: 0.0021" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_script_refuses_to_record_without_a_gpu(tmp_path, capsys):
    assert reference_gpu.main(["--out", str(tmp_path / "gpu.json")]) == 2
    assert not (tmp_path / "gpu.json").exists()
    assert "no CUDA GPU found" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_script_records_on_a_gpu(tmp_path):
    assert reference_gpu.main(["--n", "2048", "--out", str(tmp_path / "gpu.json")]) == 0
    ref = json.loads((tmp_path / "gpu.json").read_text())
    assert set(ref["results"]) == {"lesson03", "lesson04_tf32", "lesson04_amp"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
@pytest.mark.parametrize("demo", ["launch-error", "no-cache"])
def test_gpu_demos_refuse_without_a_gpu(demo, capsys):
    from course_utils import gpu_demos

    assert gpu_demos.main([demo]) == 2
    assert "no CUDA GPU found" in capsys.readouterr().err
