"""course_utils.throughput: recipes, their loaders and model, and the measuring harness."""

import math

import pytest
import torch

from course_utils import data, throughput

TINY = data.SyntheticCIFAR10(train=True, size=256)


def test_recipe_defaults_are_the_documentation_script():
    naive = throughput.NAIVE
    assert (naive.batch_size, naive.num_workers, naive.pin_memory) == (128, 0, False)
    assert throughput.NAIVE.changes() == {}
    assert throughput.Recipe(batch_size=512, channels_last=True).changes() == {
        "batch_size": 512,
        "channels_last": True,
    }


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"batch_size": 0}, "batch_size=0 must be >= 1"),
        ({"num_workers": -1}, "num_workers=-1 must be >= 0"),
        ({"autocast": "fp8"}, "autocast='fp8' is not one of None, 'bf16', 'fp16'"),
        ({"loader": "dali"}, "loader='dali' is not one of"),
    ],
)
def test_recipe_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        throughput.Recipe(**kwargs)


def test_memory_loader_covers_the_data_set_once_per_epoch():
    dataset = torch.utils.data.TensorDataset(torch.arange(10.0).view(10, 1), torch.arange(10))
    loader = throughput.MemoryLoader(dataset, batch_size=3, seed=1)
    assert len(loader) == 3
    seen = torch.cat([t for _, t in loader])
    assert len(seen) == 9 and len(set(seen.tolist())) == 9  # drops the last partial batch
    inputs, targets = next(iter(loader))
    assert torch.equal(inputs.view(-1), targets.float())  # images stay with their labels
    with pytest.raises(ValueError, match="batch_size=11 is larger than the data set"):
        throughput.MemoryLoader(dataset, batch_size=11)


@pytest.mark.parametrize(
    "recipe",
    [
        throughput.NAIVE,
        throughput.Recipe(batch_size=64, loader="memory", channels_last=True, autocast="bf16"),
    ],
)
def test_measure_trains_and_reports_a_rate(recipe):
    rate = throughput.measure(recipe, TINY, "cpu", images=128, warmup=1)
    assert math.isfinite(rate) and rate > 0


def test_measure_rejects_bad_sizes():
    with pytest.raises(ValueError, match="images=0 and blocks=5 must be >= 1"):
        throughput.measure(throughput.NAIVE, TINY, images=0)


def test_measure_takes_the_median_block(monkeypatch):
    """A burst of other work that slows one block down does not move the figure."""
    rates = iter([999.0, 100.0, 1.0, 110.0, 105.0, 95.0])  # warm-up, then five blocks

    def fake_steps(recipe, model, optimizer, loader, device, steps):
        rate = next(rates)
        return type("S", (), {"images_per_second": rate})()

    monkeypatch.setattr(throughput, "train_steps", fake_steps)
    assert throughput.measure(throughput.NAIVE, TINY, images=1280, warmup=1) == 100.0


def test_build_and_backend_flags_restore_settings():
    model, optimizer = throughput.build(throughput.Recipe(channels_last=True), "cpu")
    assert model.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    assert optimizer.param_groups[0]["lr"] == 0.05
    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark)
    with throughput.backend_flags(throughput.Recipe(tf32=True, cudnn_benchmark=True)):
        assert torch.backends.cudnn.benchmark
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark) == before


def test_time_loader_counts_images_and_stops():
    loader = data.make_loader(TINY, batch_size=100, shuffle=False)  # batches 100, 100, 56
    rate = throughput.time_loader(loader, batches=3)
    assert rate > 0
    with pytest.raises(ValueError, match="batches=0"):
        throughput.time_loader(loader, 0)


@pytest.mark.gpu
def test_measure_on_gpu_with_every_step():
    recipe = throughput.Recipe(
        batch_size=64,
        pin_memory=True,
        num_workers=1,
        channels_last=True,
        autocast="bf16",
        tf32=True,
        cudnn_benchmark=True,
    )
    assert throughput.measure(recipe, TINY, "cuda", images=128, warmup=1) > 0
    memory = throughput.Recipe(
        batch_size=64, loader="memory", compile=True, autocast="bf16", channels_last=True
    )
    assert throughput.measure(memory, TINY, "cuda", images=128, warmup=2) > 0
