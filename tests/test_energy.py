"""energy: NVML's counter on a GPU, RAPL where readable, else "not reported" (lesson 10). The
RAPL tree is a fake /sys/class/powercap in tmp_path; NVML's answers are injected."""

import pytest

from course_utils.lab import energy


@pytest.mark.parametrize(
    "nvml, rapl, device, source",
    [
        (123, 456, "cuda", "nvml"),  # a GPU job is counted by its GPU
        (None, 456, "cuda", "rapl"),  # no NVML counter (old GPU, no nvidia-ml-py)
        (123, 456, "cpu", "rapl"),
        (None, None, "cpu", "not reported"),
        (None, None, "cuda", "not reported"),
    ],
)
def test_the_source_is_a_function_of_what_answered(nvml, rapl, device, source):
    assert energy.choose_source(nvml, rapl, device) == source


def test_counter_delta_handles_rapls_wrap():
    assert energy.counter_delta(100, 350, wraps_at=1000) == 250
    assert energy.counter_delta(900, 50, wraps_at=1000) == 150
    with pytest.raises(ValueError, match="went backwards .*driver reloaded"):
        energy.counter_delta(900, 50, wraps_at=None)


def _rapl(root, packages):
    for name, (uj, wrap) in packages.items():
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "energy_uj").write_text(f"{uj}\n")
        (folder / "max_energy_range_uj").write_text(f"{wrap}\n")
    (root / "intel-rapl:0:0").mkdir()  # a sub-domain (core): not a package, not summed


def test_rapl_sums_the_packages(tmp_path):
    _rapl(tmp_path, {"intel-rapl:0": (1_000_000, 10**9), "intel-rapl:1": (2_000_000, 10**9)})
    assert [p.name for p in energy.rapl_packages(tmp_path)] == ["intel-rapl:0", "intel-rapl:1"]
    assert energy.read_rapl(tmp_path) == 3_000_000
    assert energy.read_rapl(tmp_path / "missing") is None


def test_unreadable_rapl_is_not_reported(tmp_path):
    (tmp_path / "intel-rapl:0").mkdir()  # energy_uj missing, as when it is root-only
    assert energy.read_rapl(tmp_path) is None
    meter = energy.EnergyMeter.start("cpu", rapl_root=tmp_path)
    used = meter.stop()
    assert (used.joules, used.source) == (None, "not reported")
    assert used.scope == "no GPU, and RAPL is not readable here"


def test_a_meter_on_rapl_counts_joules(tmp_path):
    _rapl(tmp_path, {"intel-rapl:0": (5_000_000, 10**9)})
    meter = energy.EnergyMeter.start("cpu", rapl_root=tmp_path)
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("7500000\n")
    used = meter.stop()
    assert (used.joules, used.source) == (pytest.approx(2.5), "rapl")
    assert used.as_dict() == {"joules": pytest.approx(2.5), "source": "rapl", "scope": used.scope}


def test_a_meter_on_nvml_counts_the_gpus_millijoules(monkeypatch, tmp_path):
    readings = iter([1_000, 1_000, 4_500])  # the probe, start and stop, in mJ
    monkeypatch.setattr(energy, "nvml_reader", lambda index: lambda: next(readings))
    monkeypatch.setattr(energy, "nvml_index", lambda device: 0)
    used = energy.EnergyMeter.start("cuda:0", rapl_root=tmp_path).stop()
    assert (used.joules, used.source) == (pytest.approx(3.5), "nvml")
    assert used.scope == "cuda:0 (NVML total energy)"


def test_the_nvml_number_follows_cuda_visible_devices(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "_get_nvml_device_index", lambda i: i + 2, raising=False)
    assert energy.nvml_index("cuda:1") == 3  # CUDA_VISIBLE_DEVICES=2,3: cuda:1 is GPU 3
    monkeypatch.delattr(torch.cuda, "_get_nvml_device_index")
    assert energy.nvml_index("cuda:1") == 1
