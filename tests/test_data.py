import pytest
import torch

from course_utils import data, synthetic


def test_cifar10_falls_back_and_says_so(tmp_path, capsys):
    dataset = data.cifar10(tmp_path, train=False, synthetic_size=10)
    assert isinstance(dataset, data.SyntheticCIFAR10) and len(dataset) == 10
    out = capsys.readouterr().out
    assert out.startswith("data: synthetic CIFAR-10 stand-in (10 test images)")
    assert str(tmp_path) in out and "course data fetch" in out


def test_data_root_env(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_DATA", str(tmp_path))
    assert data.data_root() == tmp_path
    assert data.data_root("elsewhere").name == "elsewhere"


def test_make_loader_is_reproducible():
    d = data.SyntheticCIFAR10(size=100)
    first = [t.tolist() for _, t in data.make_loader(d, batch_size=10, seed=3)]
    again = [t.tolist() for _, t in data.make_loader(d, batch_size=10, seed=3)]
    other = [t.tolist() for _, t in data.make_loader(d, batch_size=10, seed=4)]
    assert first == again and first != other


@pytest.mark.parametrize(
    "kwargs, message",
    [({"batch_size": 0}, "batch_size=0"), ({"num_workers": -1}, "num_workers=-1")],
)
def test_make_loader_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        data.make_loader(data.SyntheticCIFAR10(size=4), **kwargs)


def test_fetch_without_network_ends_with_one_clear_line(tmp_path, monkeypatch, capsys):
    import urllib.error

    from course_utils.cli import main

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr("torchvision.datasets.cifar.download_and_extract_archive", offline)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert main(["data", "fetch", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not download CIFAR-10" in err[0]
    assert "Name or service not known" in err[0] and "login node" in err[0]
    assert f"copy cifar-10-python.tar.gz into {tmp_path}" in err[0]


def test_is_synthetic_sees_through_random_split(tmp_path):
    from torch.utils.data import TensorDataset, random_split

    stand_in = data.SyntheticCIFAR10(size=10)
    part, _ = random_split(stand_in, [6, 4], generator=torch.Generator().manual_seed(0))
    assert data.is_synthetic(stand_in) and data.is_synthetic(part)
    assert not data.is_synthetic(TensorDataset(torch.zeros(2, 3)))


def test_is_synthetic_knows_the_stand_in_on_disk(tmp_path):
    synthetic.write_standin(tmp_path, train_size=10, test_size=4)
    on_disk = data.cifar10(tmp_path, train=False, quiet=True)
    assert not isinstance(on_disk, data.SyntheticCIFAR10) and data.is_synthetic(on_disk)


def test_the_stand_in_is_the_one_design_names_with_data():
    assert data.SyntheticCIFAR10 is synthetic.SyntheticCIFAR10


def test_loader_rates_time_a_full_pass_per_worker_count(monkeypatch):
    dataset = torch.utils.data.TensorDataset(torch.zeros(100, 3), torch.zeros(100))
    rates = data.loader_rates(dataset, batch_size=32, workers=[0])  # workers fork: integration
    assert list(rates) == [0] and rates[0] > 0
    monkeypatch.setattr(data.hpc, "allocated_cpus", lambda: 0)
    assert list(data.loader_rates(dataset, batch_size=32)) == [0]  # 0 up to the allocation
