"""course_utils.synthetic: the stand-in in memory and in torchvision's format, loaded unchanged."""

import json
import pickle

import pytest
import torch
from torchvision.datasets import CIFAR10
from torchvision.transforms import ToTensor

from course_utils import data, synthetic


def test_synthetic_shapes_and_determinism():
    a, b = synthetic.SyntheticCIFAR10(size=64), synthetic.SyntheticCIFAR10(train=True, size=64)
    image, label = a[3]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32
    assert 0 <= label < 10 and isinstance(label, int)
    assert torch.equal(a.data, b.data) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.data, synthetic.SyntheticCIFAR10(train=False, size=64).data)


def test_synthetic_is_roughly_normalized():
    d = synthetic.SyntheticCIFAR10(size=512)
    assert abs(float(d.data.mean())) < 0.1 and 0.9 < float(d.data.std()) < 1.1


def test_synthetic_classes_are_separable_by_their_pattern():
    """A nearest-class-mean classifier beats chance by far: the data carry label information."""
    train, test = synthetic.SyntheticCIFAR10(train=True), synthetic.SyntheticCIFAR10(train=False)
    means = torch.stack([train.data[train.targets == k].mean(0) for k in range(10)]).flatten(1)
    predicted = torch.cdist(test.data.flatten(1), means).argmin(1)
    assert (predicted == test.targets).float().mean() > 0.5


def test_size_must_be_positive():
    with pytest.raises(ValueError, match="size=0 must be at least 1"):
        synthetic.SyntheticCIFAR10(size=0)


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    synthetic.write_standin(root, train_size=60, test_size=20, seed=3)
    return root


def test_torchvision_loads_the_standin_unchanged(standin, capsys):
    synthetic.accept_standin()
    train = CIFAR10(root=str(standin), train=True, download=False, transform=ToTensor())
    test = CIFAR10(root=str(standin), train=False, download=False)
    assert (len(train), len(test)) == (60, 20) and train.classes == list(synthetic.CIFAR10_CLASSES)
    image, label = train[7]
    assert image.shape == (3, 32, 32) and 0 <= label < 10
    assert "synthetic CIFAR-10 stand-in, not CIFAR-10" in capsys.readouterr().err


def test_the_round_trip_keeps_images_and_labels(standin):
    """What torchvision reads back is the course's SyntheticCIFAR10, quantized to bytes as real
    images are (values beyond the 0..255 range clip, as in any 8-bit image)."""
    synthetic.accept_standin()
    original = synthetic.SyntheticCIFAR10(train=False, size=20, seed=3)
    mean = torch.tensor(synthetic.CIFAR10_MEAN)[:, None, None]
    std = torch.tensor(synthetic.CIFAR10_STD)[:, None, None]
    back = CIFAR10(root=str(standin), train=False, download=False, transform=ToTensor())
    for i in (0, 19):
        image, label = back[i]
        assert label == int(original.targets[i])
        pixels = original.data[i] * std + mean
        inside = (pixels > 0) & (pixels < 1)
        assert inside.float().mean() > 0.9  # most pixels need no clipping
        assert (image - pixels)[inside].abs().max() <= 0.5 / 255 + 1e-6  # rounding only


def test_a_damaged_standin_is_still_refused(tmp_path):
    synthetic.write_standin(tmp_path, train_size=10, test_size=5)
    batch = tmp_path / synthetic.FOLDER / "test_batch"
    batch.write_bytes(batch.read_bytes()[:-100])  # a truncated copy
    synthetic.accept_standin()
    with pytest.raises(RuntimeError, match="not found or corrupted"):
        CIFAR10(root=str(tmp_path), train=False, download=False)


def test_it_says_it_is_synthetic_everywhere(standin):
    folder = standin / synthetic.FOLDER
    manifest = json.loads((folder / synthetic.MANIFEST).read_text())
    assert manifest["synthetic"] and "not CIFAR-10" in manifest["what"]
    with open(folder / "data_batch_1", "rb") as f:
        assert "not CIFAR-10" in pickle.load(f, encoding="latin1")["batch_label"]
    assert synthetic.is_standin(standin)


def test_course_data_cifar10_says_it_found_the_standin(standin, capsys):
    dataset = data.cifar10(standin, train=False)
    assert len(dataset) == 20
    out = capsys.readouterr()
    assert out.out.startswith("data: synthetic CIFAR-10 stand-in from") and out.err == ""


def test_real_data_is_never_overwritten(tmp_path):
    folder = tmp_path / synthetic.FOLDER
    folder.mkdir()
    (folder / "data_batch_1").write_bytes(b"real CIFAR-10")
    with pytest.raises(ValueError, match="holds CIFAR-10 already"):
        synthetic.write_standin(tmp_path, 10, 5)


def test_sizes_must_fill_the_format(tmp_path):
    with pytest.raises(ValueError, match="test_size=0 must be at least 1"):
        synthetic.write_standin(tmp_path, 10, 0)
    with pytest.raises(ValueError, match="train_size=3 must be at least 5: .* 5 batch files"):
        synthetic.write_standin(tmp_path, 3, 2)


def test_course_data_synthetic_prints_the_line_that_runs_a_script(tmp_path, capsys):
    from course_utils.cli import STANDIN_RUN, main

    assert (
        main(
            [
                "data",
                "synthetic",
                "--root",
                str(tmp_path),
                "--train-size",
                "20",
                "--test-size",
                "10",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert "Dataset not found or corrupted" in lines[0]
    assert lines[-1] == f"    {STANDIN_RUN}"
    assert STANDIN_RUN.startswith("python -m course_utils.jobs.your_program ")
