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


class FakeClock:
    """Seconds that pass only when a fake training step says so: no sleep, so no load on the
    machine can stretch them (a slept 10 ms step read 50 ms beside other work)."""

    def __init__(self, monkeypatch):
        self.now = 0.0
        monkeypatch.setattr(throughput, "time", self)
        monkeypatch.setattr(throughput.timing, "synchronizing_clock", lambda _: self.perf_counter)

    def perf_counter(self) -> float:
        return self.now


def test_warm_times_steady_training_only(monkeypatch):
    """The warm-up steps are slow (0.3 s each here: compilation, worker start-up, the first
    batches); a steady step takes 10 ms: the rate is that of the steady steps."""
    steps, clock = [], FakeClock(monkeypatch)

    def fake_steps(recipe, model, optimizer, batches, device, limit):
        n = len(list(batches))
        clock.now += (0.01 if steps else 0.3) * n  # the first call: the warm-up
        steps.append(n)

    monkeypatch.setattr(throughput, "train_steps", fake_steps)
    warm = throughput.Warm(throughput.NAIVE, TINY, "cpu", warmup=2)
    assert steps == [2, 1] and warm.build_seconds == pytest.approx(0.61)  # warm-up, one steady
    rate = warm.rate(seconds=0.1)
    assert steps[-1] == 10  # one block of steps filling 0.1 s
    # 12,800 images/s; with a warm-up step timed it would be under 1,000
    assert rate == pytest.approx(throughput.NAIVE.batch_size / 0.01)


def test_warm_sizes_its_blocks_from_the_steps_it_timed_last(monkeypatch):
    """The steady step timed while building fell in a burst (100 ms); the steps take 10 ms:
    the blocks grow back to about `seconds` once the recent steps say so."""
    steps, clock = [], FakeClock(monkeypatch)
    seconds = iter([0.0, 0.1])  # the warm-up, the burst, then 10 ms per step

    def fake_steps(recipe, model, optimizer, batches, device, limit):
        n = len(list(batches))
        clock.now += next(seconds, 0.01) * n
        steps.append(n)

    monkeypatch.setattr(throughput, "train_steps", fake_steps)
    warm = throughput.Warm(throughput.NAIVE, TINY, "cpu", warmup=2)
    for _ in range(4):
        warm.rate(seconds=0.1)
    assert steps[2] == 1 and steps[-1] == 10, steps  # 1 step while the burst ruled


def test_warm_trains_for_real_and_keeps_its_loader_between_rates():
    recipe = throughput.Recipe(batch_size=32, channels_last=True)
    warm = throughput.Warm(recipe, TINY, "cpu", warmup=1)
    batches, first = warm.batches, warm.rate(seconds=0.05)
    second = warm.rate(seconds=0.05)
    assert first > 0 and second > 0 and math.isfinite(first + second)
    assert warm.batches is batches  # one loader, its workers (if any) started once
    with pytest.raises(ValueError, match="warmup=-1"):
        throughput.Warm(recipe, TINY, warmup=-1)


def test_bench_keeps_the_recipes_it_measured_last_warm(monkeypatch):
    built = []

    class FakeWarm:
        def __init__(self, recipe, dataset, device, warmup):
            built.append(recipe.batch_size)
            self.recipe = recipe

        def rate(self, seconds):
            return 10.0 * self.recipe.batch_size

    monkeypatch.setattr(throughput, "Warm", FakeWarm)
    bench = throughput.Bench(TINY, "cpu", seconds=0.1)
    sizes = [128, 256, 128, 256, 512, 128, 512, 1024, 128]  # a best (128) and its candidates
    rates = [bench(throughput.Recipe(batch_size=b)) for b in sizes]
    assert rates == [10.0 * b for b in sizes]
    assert built == [128, 256, 512, 1024]  # the best stays warm throughout
    assert bench.warm(throughput.Recipe(batch_size=512)).recipe.batch_size == 512  # still warm
    bench.warm(throughput.Recipe(batch_size=256))  # gone when 1024 came: built again
    assert built == [128, 256, 512, 1024, 256] and len(bench.running) == 3
    with pytest.raises(ValueError, match="keep=1"):
        throughput.Bench(TINY, keep=1)


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
