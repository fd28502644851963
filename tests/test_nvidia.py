"""nvidia: the node's GPUs, compute mode and processes, parsed from nvidia-smi's answers."""

import shutil
import types

from course_utils import nvidia

GPUS = (
    "0, GPU-1a2b3c4d-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3, Exclusive_Process\n"
    "1, GPU-9f8e7d6c-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3, Default\n"
)
APPS = (
    "GPU-1a2b3c4d-0000-1111-2222-333344445555, 4242, /opt/venv/bin/python, 2311\n"
    "GPU-1a2b3c4d-0000-1111-2222-333344445555, 5150, [Not Found], [N/A]\n"
)


def test_gpus_and_their_modes_from_nvidia_smi(fake_commands, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    fake = fake_commands({f"nvidia-smi --query-gpu={','.join(nvidia.GPU_FIELDS)}": GPUS})
    found = nvidia.gpus()
    assert [(g.index, g.compute_mode) for g in found] == [(0, "Exclusive_Process"), (1, "Default")]
    assert found[0].uuid.startswith("GPU-1a2b") and "H100" in found[0].name
    assert fake.calls[0][-1] == "--format=csv,noheader,nounits"
    assert nvidia.is_exclusive(found[0].compute_mode) and not nvidia.is_exclusive("Default")
    assert nvidia.is_exclusive("E. Process")  # the summary table's short form


def test_processes_holding_a_gpu(fake_commands, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    fake_commands({f"nvidia-smi --query-compute-apps={','.join(nvidia.APP_FIELDS)}": APPS})
    first, second = nvidia.compute_processes()
    assert (first.pid, first.used_mib, first.name) == (4242, 2311.0, "/opt/venv/bin/python")
    assert second.used_mib is None


def test_no_nvidia_smi_means_no_gpus_and_no_command(fake_commands, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    fake = fake_commands({})
    assert nvidia.gpus() == [] and nvidia.compute_processes() == [] and fake.calls == []


def test_pytorchs_uuid_in_nvidia_smis_words():
    plain = types.SimpleNamespace(uuid="1a2b3c4d-0000-1111-2222-333344445555")
    assert nvidia.torch_uuid(plain) == "GPU-1a2b3c4d-0000-1111-2222-333344445555"
    assert nvidia.torch_uuid(types.SimpleNamespace()) is None


def test_the_mode_of_a_gpu_by_uuid_else_exclusive_wins():
    gpus = nvidia.parse_gpus(GPUS)
    exclusive, default = gpus
    assert nvidia.mode_of(gpus, default.uuid) == "Default"
    assert nvidia.mode_of(gpus, exclusive.uuid) == "Exclusive_Process"
    assert nvidia.mode_of(gpus, None) == "Exclusive_Process"  # unknown: the safe answer
    assert nvidia.mode_of([default], "GPU-unknown") == "Default"
    assert nvidia.mode_of([], None) is None


def test_each_rank_finds_the_gpu_it_trains_on_by_uuid():
    """nvidia-smi's index, not CUDA's: a task bound to the node's second GPU sees it as cuda:0."""
    listed = nvidia.parse_gpus(GPUS)
    assert nvidia.index_of("GPU-9f8e7d6c-0000-1111-2222-333344445555", listed) == 1
    assert nvidia.index_of("GPU-z", listed) is None and nvidia.index_of(None, listed) is None
