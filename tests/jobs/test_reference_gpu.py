"""course_utils.jobs.reference_gpu and gpu_demos: they refuse loudly without a GPU."""

import json

import pytest

from course_utils.jobs import gpu_demos, reference_gpu


def test_script_refuses_to_record_without_a_gpu(fake_gpus, tmp_path, capsys):
    fake_gpus(0)
    assert reference_gpu.main(["--out", str(tmp_path / "gpu.json")]) == 2
    assert not (tmp_path / "gpu.json").exists()
    assert "no CUDA GPU found" in capsys.readouterr().err


@pytest.mark.parametrize("demo", ["launch-error", "no-cache"])
def test_gpu_demos_refuse_without_a_gpu(fake_gpus, demo, capsys):
    fake_gpus(0)
    assert gpu_demos.main([demo]) == 2
    assert "no CUDA GPU found" in capsys.readouterr().err


@pytest.mark.gpu
def test_script_records_on_a_gpu(tmp_path):
    assert reference_gpu.main(["--n", "2048", "--out", str(tmp_path / "gpu.json")]) == 0
    ref = json.loads((tmp_path / "gpu.json").read_text())
    assert set(ref["results"]) == {"lesson03", "lesson04_tf32", "lesson04_amp"}
    assert ref["commit"] and ref["torch"]
