import sys
from pathlib import Path

import pytest

from course_utils import doctor
from course_utils.grading import run_check

COURSE = str(Path(sys.executable).parent / "course")


@pytest.mark.parametrize(
    "capability, arch_list, ok",
    [
        ((9, 0), ["sm_80", "sm_90"], True),
        ((12, 0), ["sm_80", "sm_90"], False),  # "no kernel image is available"
        ((8, 6), ["sm_80", "compute_80"], True),  # PTX of 8.0 JIT-compiles for 8.6
        ((7, 5), ["sm_80", "compute_80"], False),  # PTX cannot run on an older GPU
    ],
)
def test_arch_supported(capability, arch_list, ok):
    assert doctor.arch_supported(capability, arch_list) is ok


def test_arch_rule_agrees_with_lesson_07_exercise():
    """The doctor's rule is the reference answer of exercise 07.3 (cubins, 'a' cubins, PTX)."""
    assert run_check("07.3", doctor.arch_supported).passed


@pytest.mark.parametrize(
    "torch_v, tv_v, ok",
    [("2.14.1+cu130", "0.29.1+cu130", True), ("2.6.0", "0.21.0", True), ("2.9.1", "0.29.1", False)],
)
def test_torchvision_pairs(torch_v, tv_v, ok):
    assert doctor.torchvision_pairs(torch_v, tv_v) is ok


def test_threads_warns_when_oversubscribed(monkeypatch):
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.setattr(doctor.torch, "get_num_threads", lambda: 8)
    (finding,) = doctor.threads()
    assert finding.status == doctor.WARN and "configure_threads" in finding.advice


def test_error_finding_gives_exit_code_1(monkeypatch, capsys):
    bad = doctor.Finding("gpu 0", "X, compute capability 12.1", doctor.ERROR, "install a build")
    monkeypatch.setattr(doctor, "collect", lambda: [bad])
    assert doctor.main() == 1
    assert "[error]  X, compute capability 12.1" in capsys.readouterr().out


def test_report_covers_every_topic():
    topics = {f.topic for f in doctor.collect()}
    for needed in (
        "python",
        "pytorch",
        "torchvision",
        "cuda (build)",
        "cudnn",
        "cpu threads",
        "tf32",
        "distributed backends",
        "data",
        "jupyter kernel",
    ):
        assert needed in topics
    assert any(t.startswith("gpu") for t in topics)
