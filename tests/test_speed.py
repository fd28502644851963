"""course_utils.speed: tuning steps, tuning and comparing, the table, the plot, bottleneck
(08.2's reference answer), and the names lesson 08 reaches through speed.*."""

import random

import matplotlib
import pytest
import torch

from course_utils import data, speed, throughput

matplotlib.use("Agg")
TINY = data.SyntheticCIFAR10(train=True, size=256)


def test_tuning_steps_order_and_gates():
    steps = speed.tuning_steps(cpus=4)
    names = [s.name for s in steps]
    assert names[:5] == [
        "batch size 256",
        "batch size 512",
        "batch size 1024",
        "4 DataLoader workers",
        "pinned memory, non_blocking",
    ]
    autocast = "autocast bf16 (with channels_last)"
    order = [names.index(n) for n in ("channels_last", autocast, "torch.compile")]
    assert order == sorted(order)
    # bf16 in NCHW ran slower than fp32 on the course's CPU: autocast is tried with NHWC even
    # when channels_last alone was dropped.
    assert steps[names.index(autocast)].changes == {"autocast": "bf16", "channels_last": True}
    pinned = steps[4]
    assert not pinned.applies_to("cpu") and pinned.applies_to("cuda:0")
    assert "torch.compile" not in [s.name for s in speed.tuning_steps(cpus=4, compile=False)]


def _fake_rate(recipe):
    """Images/s of a made-up machine: batch 256 x2, 512 x3, 1024 x2.5 (out of cache), workers
    x0.5, memory loader x1.02, compile x2."""
    rate = 100.0 * {128: 1, 256: 2, 512: 3, 1024: 2.5}[recipe.batch_size]
    rate *= 0.5 if recipe.num_workers else 1
    return rate * (1.02 if recipe.loader == "memory" else 1) * (2 if recipe.compile else 1)


def test_tune_keeps_what_is_faster_in_its_pairs():
    """Without noise every pair gives the same ratio: a step faster by 2% is faster in each of
    its 8 pairs (the fewest with a 99% interval), and kept; one that changes nothing lies
    within the smallest gain worth keeping."""
    tuned, results = speed.tune(TINY, "cpu", speed.tuning_steps(cpus=2), bench=_fake_rate)
    assert tuned == throughput.Recipe(batch_size=512, compile=True, loader="memory")
    by_name = {r.step: r for r in results}
    assert results[0].step == "baseline (documentation script)"
    assert results[0].images_per_second == 100
    assert by_name["batch size 256"].kept and by_name["batch size 512"].note == "faster: kept"
    big = by_name["batch size 1024"]
    assert (big.note, big.ratio, big.low, big.high) == (
        "slower: dropped",
        2.5 / 3,
        2.5 / 3,
        2.5 / 3,
    )
    assert (big.images_per_second, big.best_per_second, big.pairs) == (250, 300, 8)
    assert not by_name["2 DataLoader workers"].kept
    assert by_name["pinned memory, non_blocking"].skipped
    assert by_name["pinned memory, non_blocking"].note == (
        "skipped here: needs cuda, running on cpu"
    )
    same = by_name["channels_last"]
    assert same.no_difference and same.note == "no difference: dropped" and same.ratio == 1
    memory = by_name["batches from memory"]
    assert memory.kept and memory.ratio == pytest.approx(1.02)
    table = speed.results_table(results)
    assert "batch size 512" in table and "1.50x" in table and "0.83-0.83x" in table


def _loader_bound_machine(calls=None):
    """A made-up GPU job that runs as fast as the slower of its loader (500 images/s through a
    DataLoader, unlimited from memory) and its compute (800 images/s; channels_last x1.5,
    compile x2): while the DataLoader feeds it, no compute step can show."""

    def rate(recipe):
        if calls is not None:
            calls.append(recipe)
        compute = 800.0 * (1.5 if recipe.channels_last else 1) * (2 if recipe.compile else 1)
        return min(compute, float("inf") if recipe.loader == "memory" else 500.0)

    return rate


def _steps(*names):
    steps = {s.name: s for s in speed.tuning_steps(cpus=2)}
    return [steps[n] for n in names]


def test_tune_retries_compute_steps_dropped_while_the_loader_limited_the_job():
    steps = _steps("channels_last", "torch.compile", "batches from memory")
    tuned, results = speed.tune(TINY, "cpu", steps, bench=_loader_bound_machine())
    assert [(r.step, r.images_per_second, r.kept) for r in results] == [
        ("baseline (documentation script)", 500.0, True),
        ("channels_last", 500.0, False),
        ("torch.compile", 500.0, False),
        ("batches from memory", 800.0, True),
        ("channels_last (re-tried)", 1200.0, True),
        ("torch.compile (re-tried)", 2400.0, True),
    ]
    assert results[4].retried and not results[1].retried
    assert results[4].note == ("faster: kept (re-tried after 'batches from memory' was kept)")
    assert results[5].best_per_second == 1200.0  # judged against the re-tried channels_last
    assert tuned == throughput.Recipe(channels_last=True, compile=True, loader="memory")


def test_tune_without_retry_is_the_old_one_pass_method():
    steps = _steps("channels_last", "torch.compile", "batches from memory")
    tuned, results = speed.tune(TINY, "cpu", steps, bench=_loader_bound_machine(), retry=False)
    assert tuned == throughput.Recipe(loader="memory")  # compute steps lost to the loader's limit
    assert len(results) == 4 and not any(r.retried for r in results)


def test_tune_retries_only_compute_steps_dropped_before_a_kept_loader_step():
    calls = []
    steps = _steps("2 DataLoader workers", "channels_last", "batches from memory", "torch.compile")
    _, results = speed.tune(TINY, "cpu", steps, bench=_loader_bound_machine(calls))
    names = [r.step for r in results]
    # workers (loader side) and compile (judged after the move, on batches from memory) are
    # not re-tried; channels_last is.
    assert names[-1] == "channels_last (re-tried)" and names.count("torch.compile") == 1
    assert "2 DataLoader workers (re-tried)" not in names
    # the start once, then 8 pairs per verdict: each decided at the fewest pairs with an interval
    assert len(calls) == 1 + 16 * (len(results) - 1)


def test_tune_does_not_remeasure_a_retry_already_in_the_recipe():
    both = speed.Step("channels_last and compile", {"channels_last": True, "compile": True})
    steps = [both, *_steps("channels_last", "batches from memory")]
    calls = []
    tuned, results = speed.tune(TINY, "cpu", steps, bench=_loader_bound_machine(calls))
    assert [(r.step, r.kept) for r in results[-2:]] == [
        ("channels_last and compile (re-tried)", True),
        ("channels_last (re-tried)", False),
    ]
    assert results[-1].skipped and results[-1].note == "not measured: already in the recipe"
    assert len(calls) == 1 + 16 * (len(results) - 2)  # the last verdict took no measurement
    assert tuned == throughput.Recipe(channels_last=True, compile=True, loader="memory")


def test_step_side_is_loader_or_compute():
    sides = {s.name: s.side for s in speed.tuning_steps(cpus=2)}
    assert [n for n, side in sides.items() if side == "loader"] == [
        "2 DataLoader workers",
        "pinned memory, non_blocking",
        "batches from memory",
    ]
    with pytest.raises(ValueError, match="side='gpu' is not one of"):
        speed.Step("x", side="gpu")


def _drifting_machine(gains: dict, seed: int = 0, jitter: float = 0.01, outlier_at=None):
    """A shared machine whose load drifts: a recipe's rate wanders over about 50% while the
    tuning runs, each measurement also off by up to `jitter`; `gains` maps a Recipe field to how
    many times faster its non-default value trains. `outlier_at`: that call (1-based) comes
    out 5x too slow, a burst of other work."""
    rng, calls, load = random.Random(seed), [], [1.0]

    def rate(recipe):
        calls.append(recipe)
        load[0] = min(1.3, max(0.7, load[0] * rng.uniform(0.98, 1.02)))
        value = 100.0 * load[0] * rng.uniform(1 - jitter, 1 + jitter)
        for name, gain in gains.items():
            value *= gain if getattr(recipe, name) != getattr(throughput.NAIVE, name) else 1
        rate.loads.append(load[0])
        return value / 5 if len(calls) == outlier_at else value

    rate.loads = []  # the load at each measurement
    return rate


def test_tune_keeps_steps_faster_in_every_pair_though_the_load_drifts_far_more():
    """3% and 5% gains on a machine whose load swings its rates by more than 15% while the
    tuning runs: each step is faster in every pair, and kept."""
    steps = speed.tuning_steps(cpus=2, batch_sizes=(256,))
    machine = _drifting_machine({"batch_size": 1.05, "channels_last": 1.03, "num_workers": 0.9})
    tuned, results = speed.tune(TINY, "cpu", steps, bench=machine, retry=False)
    assert tuned == throughput.Recipe(batch_size=256, channels_last=True)
    by_name = {r.step: r for r in results}
    for name in ("batch size 256", "channels_last"):
        r = by_name[name]
        assert all(ratio > 1 for ratio in r.ratios) and r.kept and r.low > 1, r
    assert max(machine.loads) / min(machine.loads) > 1.15  # the load swung rates far more
    assert by_name["2 DataLoader workers"].note == "slower: dropped"
    assert by_name["autocast bf16 (with channels_last)"].no_difference


def test_an_outlier_in_one_step_neither_decides_it_nor_carries_into_the_next():
    steps = speed.tuning_steps(cpus=2, batch_sizes=(256, 512))[:2]
    gains = {"batch_size": 1.0}  # batch sizes change nothing here
    clean = speed.tune(TINY, "cpu", steps, bench=_drifting_machine(gains), retry=False)[1]
    spoiled = _drifting_machine(gains, outlier_at=4)  # in the first step's second pair
    results = speed.tune(TINY, "cpu", steps, bench=spoiled, retry=False)[1]
    assert [r.verdict for r in results[1:]] == [r.verdict for r in clean[1:]]
    assert [r.verdict for r in results[1:]] == ["no difference", "no difference"]
    assert max(results[1].ratios) > 4  # the burst slowed the first step's second pair
    assert all(0.9 < ratio < 1.1 for ratio in results[2].ratios)  # nothing of it in the next


def test_a_step_the_budget_cannot_decide_is_undecided_and_dropped():
    steps = speed.tuning_steps(cpus=2, batch_sizes=(256,))[:1]
    machine = _drifting_machine({"batch_size": 1.03}, jitter=0.2)
    tuned, results = speed.tune(TINY, "cpu", steps, bench=machine, max_pairs=6)
    assert results[1].note == "undecided after 6 pairs: dropped" and results[1].low is None
    assert tuned == throughput.NAIVE


def test_tune_pairs_alternate_the_best_and_each_candidate():
    calls = []

    def fake(recipe):
        calls.append(recipe)
        return _fake_rate(recipe)

    steps = speed.tuning_steps(cpus=2, batch_sizes=(512,))[:1]
    speed.tune(TINY, "cpu", steps, bench=fake)
    big = throughput.Recipe(batch_size=512)
    assert calls[0] == throughput.NAIVE  # the start, once: the table's first row
    assert calls[1:5] == [big, throughput.NAIVE, throughput.NAIVE, big]
    assert len(calls) == 17


def test_a_bench_warms_both_recipes_before_their_first_pair():
    events = []

    class FakeBench:
        def warm(self, recipe):
            events.append(("warm", recipe.batch_size))

        def __call__(self, recipe):
            events.append(("measure", recipe.batch_size))
            return _fake_rate(recipe)

    v = speed.compare(throughput.NAIVE, throughput.Recipe(batch_size=512), bench=FakeBench())
    assert events[:3] == [("warm", 128), ("warm", 512), ("measure", 512)]
    assert (v.verdict, v.ratio, v.candidate_median, v.baseline_median) == ("faster", 3, 300, 100)


@pytest.mark.parametrize(
    ("rates", "limit", "bound"),
    [
        ((2000.0, 8000.0, 1600.0), "loader", 1.25),  # loading 2000/s caps a job now at 1600/s
        ((9000.0, 3000.0, 2250.0), "compute", 3000 / 2250),
        ((4000.0, 4000.0, 4000.0), "compute", 1.0),  # a tie: faster loading would not help
    ],
)
def test_bottleneck_names_the_slower_part_and_bounds_the_gain(rates, limit, bound):
    got_limit, got_bound = speed.bottleneck(*rates)
    assert got_limit == limit
    assert got_bound == pytest.approx(bound)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_bottleneck_rejects_rates_that_are_not_positive(bad):
    with pytest.raises(ValueError, match=r"measured_rate=.*must be > 0"):
        speed.bottleneck(1000.0, 2000.0, bad)


def test_plot_steps_draws_each_verdicts_two_rates():
    rows = [
        {"step": "a", "images_per_second": 10.0, "kept": True, "best_per_second": None},
        {"step": "b", "images_per_second": None, "kept": False},
        {"step": "c", "images_per_second": 5.0, "kept": False, "best_per_second": 10.0},
    ]
    fig = speed.plot_steps(rows, "t")
    widths = [b.get_width() for b in fig.axes[0].patches]
    assert widths == [5.0, 10.0, 10.0, 0]  # candidates (c, a), then the best beside each
    assert "blue: the best recipe measured beside it" in fig.axes[0].get_title()


def test_plot_steps_says_when_a_record_lacks_the_best_rates():
    old = [{"step": "a", "images_per_second": 10.0, "kept": True, "note": "as written"}]
    title = speed.plot_steps(old, "t").axes[0].get_title()
    assert "the best recipe's rates beside each verdict were not recorded" in title


def test_cuda_graphs_step_compiles_in_reduce_overhead_mode(monkeypatch):
    step = next(s for s in speed.tuning_steps(cpus=2) if s.name.startswith("CUDA graphs"))
    assert step.needs == "cuda" and not step.applies_to("cpu")
    assert step.changes == {"compile": True, "compile_mode": "reduce-overhead"}
    modes = []
    monkeypatch.setattr(torch, "compile", lambda model, mode=None: modes.append(mode) or model)
    throughput.build(throughput.Recipe(**step.changes), "cpu")
    throughput.build(throughput.Recipe(compile=True), "cpu")
    assert modes == ["reduce-overhead", None]


def test_plot_pairs_draws_each_pair_and_each_interval():
    steps = speed.tuning_steps(cpus=2, batch_sizes=(256,))[:3]  # 256, workers, pinned (skipped)
    _, results = speed.tune(TINY, "cpu", steps, bench=_fake_rate)
    ax = speed.plot_pairs(results, "t").axes[0]
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    bars = [line for line in ax.lines if line.get_linewidth() == 5]
    assert [len(d.get_xdata()) for d in dots] == [8, 8]  # workers on top, then batch 256
    assert [list(b.get_xdata()) for b in bars] == [[0.5, 0.5], [2.0, 2.0]]
    assert [b.get_color() for b in bars] == ["black", "tab:green"]  # dropped, kept
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "2 DataLoader workers",
        "batch size 256",
    ]
