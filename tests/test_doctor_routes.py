"""The declared PyTorch range: its low end in the Makefile, and `course doctor`'s gap rows, which
probe this PyTorch for what each lesson detects. The probes are tested by injecting the answers
of PyTorch 2.6 and of the pin, whatever release runs the tests."""

import re
import types
from pathlib import Path

import pytest
import torch

import course_utils
from course_utils.doctor import report, routes, versions
from course_utils.doctor.findings import INFO, WARN

ROOT = Path(__file__).resolve().parent.parent


def _make_variable(name: str) -> str:
    return re.search(rf"^{name} := (\S+)$", (ROOT / "Makefile").read_text(), re.M)[1]


def test_the_low_end_in_the_makefile_is_a_pair_and_the_declared_floor():
    torch_min, torchvision_min = _make_variable("TORCH_MIN"), _make_variable("TORCHVISION_MIN")
    assert versions.torchvision_pairs(torch_min, torchvision_min), (torch_min, torchvision_min)
    floor = re.search(r'"torch>=([\d.]+)"', (ROOT / "pyproject.toml").read_text())[1]
    assert versions.major_minor(torch_min) == versions.major_minor(floor)
    assert versions.major_minor(torch_min) == versions.OLDEST_TORCH
    assert versions.older_than_pin(torch_min)


@pytest.mark.parametrize(
    "version, older",
    [("2.6.0+cu124", True), ("2.14.0", True), ("2.14.1+cu130", False), ("2.15.0a0", False)],
)
def test_older_than_the_pin(version, older):
    assert versions.older_than_pin(version, tested="2.14.1") is older


def test_the_pytorch_row_counts_the_lessons_that_take_another_route():
    finding = versions.pytorch_finding("2.6.0+cu124", tested="2.14.1", other_routes=5)
    assert finding.status == WARN
    assert finding.advice.startswith("older than the pin: 5 lesson(s) take another route here")
    assert "pip install -r requirements.txt (torch==2.14.1)" in finding.advice


def test_other_routes_lists_only_the_lessons_whose_probes_speak():
    probes = {"01": (lambda: None,), "02": (lambda: "one", lambda: None, lambda: "two")}
    other = routes.other_routes(probes)
    assert other == {"02": "one; two"}
    assert [(f.topic, f.value, f.status) for f in routes.route_findings(other)] == [
        ("lesson 02", "one; two", INFO)
    ]


def test_an_older_pytorch_gets_a_row_per_lesson_and_the_pin_none(monkeypatch):
    monkeypatch.setattr(routes, "other_routes", lambda: {"01": "differs", "09": "too"})
    monkeypatch.setattr(torch, "__version__", "2.6.0+cu124")
    topics = [f.topic for f in report.versions()]
    assert topics[:4] == ["python", "pytorch", "lesson 01", "lesson 09"]
    monkeypatch.setattr(torch, "__version__", course_utils.TESTED_TORCH)
    assert not any(t.startswith("lesson") for t in (f.topic for f in report.versions()))


def _raises(error):
    def call(*args, **kwargs):
        raise error

    return call


@pytest.mark.parametrize(
    "error, says",
    [
        (NotImplementedError("'check_uniform_bounds' not implemented for 'Long'"), None),  # 2.14
        (RuntimeError("'check_uniform_bounds' not implemented for 'Long'"), "raises RuntimeError"),
    ],
)
def test_lesson_01_probe(error, says, monkeypatch):
    monkeypatch.setattr(torch, "rand", _raises(error))
    line = routes.rand_long()
    assert line is None if says is None else says in line


def test_lesson_02_accelerator_probe(monkeypatch):
    accelerator = types.SimpleNamespace(is_available=lambda: False)
    monkeypatch.setattr(torch, "accelerator", accelerator)
    accelerator.current_accelerator = lambda: torch.device("cuda")  # 2.14 names the build's
    assert routes.accelerator_name() is None
    accelerator.current_accelerator = _raises(RuntimeError("Cannot access accelerator device"))
    assert "raises where no accelerator is present" in routes.accelerator_name()
    accelerator.is_available = lambda: True  # a GPU node: nothing differs
    assert routes.accelerator_name() is None
    monkeypatch.delattr(torch, "accelerator")
    assert "pick_device() decide" in routes.accelerator_name()


@pytest.mark.parametrize("probe", [routes.interop_note, routes.export_notes])
def test_torchscript_probes(probe, monkeypatch):
    monkeypatch.setattr(routes, "torchscript_warns", lambda: True)
    assert probe() is None
    monkeypatch.setattr(routes, "torchscript_warns", lambda: False)
    assert probe().startswith("TorchScript gives no deprecation warning here")


def test_lesson_04_probe(monkeypatch):
    monkeypatch.setattr(torch.backends.cuda, "matmul", types.SimpleNamespace(allow_tf32=False))
    assert "legacy TF32 flags" in routes.tf32_settings()
    monkeypatch.setattr(torch.backends.cuda, "matmul", types.SimpleNamespace(fp32_precision="ieee"))
    assert routes.tf32_settings() is None


def test_lesson_05_probe(monkeypatch):
    class Stream:  # 2.6's CPU stream: no record_event
        pass

    monkeypatch.setattr(torch.cpu, "Stream", Stream)
    assert "(torch.cpu.Stream has no record_event)" in routes.fsdp2_on_cpu()
    Stream.record_event = lambda self: None
    assert routes.fsdp2_on_cpu() is None


def test_lesson_09_probe(monkeypatch):
    from course_utils.failing import flight_recorder

    found = {"torch.distributed.flight_recorder": None}
    monkeypatch.setattr(routes.importlib.util, "find_spec", lambda name: found.get(name))
    monkeypatch.setattr(flight_recorder, "gloo_dump_available", lambda: False)
    line = routes.flight_recorder()
    assert line.startswith("no flight-recorder dump for gloo (_dump_fr_trace) and no analyser")
    found["torch.distributed.flight_recorder"] = object()
    monkeypatch.setattr(flight_recorder, "gloo_dump_available", lambda: True)
    assert routes.flight_recorder() is None
