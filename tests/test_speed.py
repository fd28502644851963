"""course_utils.speed: tuning steps, tuning and comparing, the table, the plot, bottleneck
(08.2's reference answer), and the names lesson 08 reaches through speed.*."""

import matplotlib
import pytest
import torch

from course_utils import data, speed

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


def test_tune_keeps_only_what_measurably_helps():
    tuned, results = speed.tune(TINY, "cpu", speed.tuning_steps(cpus=2), measure_fn=_fake_rate)
    assert tuned == speed.Recipe(batch_size=512, compile=True)
    by_name = {r.step: r for r in results}
    assert results[0].step == "baseline (documentation script)"
    assert results[0].images_per_second == 100
    assert by_name["batch size 256"].kept and by_name["batch size 512"].note == (
        "+50% vs best: kept"
    )
    assert by_name["batch size 1024"].note == "-17% vs best: dropped"
    assert by_name["batch size 1024"].best_per_second == 300  # what the verdict compared with
    assert not by_name["2 DataLoader workers"].kept
    assert by_name["pinned memory, non_blocking"].skipped
    assert by_name["pinned memory, non_blocking"].note == (
        "skipped here: needs cuda, running on cpu"
    )
    assert not by_name["batches from memory"].kept  # +2% is under the 3% threshold
    table = speed.results_table(results)
    assert "batch size 512" in table and "600" in table


def test_table_rates_agree_with_their_verdicts():
    # The H100 record printed "batch size 2048: 84,658 images/s, -5%: dropped" after a best of
    # 65,461: the candidate's paired rate beside the best's rate from an earlier pairing. Each row
    # now shows the two rates its verdict compares, measured side by side.
    drift = iter([100.0, 90.0, 180.0, 200.0, 190.0, 180.0, 205.0])  # load changes between steps

    def measure(recipe):
        return next(drift)

    steps = speed.tuning_steps(cpus=2, batch_sizes=(256, 512, 1024))[:3]
    _, results = speed.tune(TINY, "cpu", steps, pairs=1, measure_fn=measure)
    for r in results[1:]:
        change = r.images_per_second / r.best_per_second - 1
        assert r.note.startswith(f"{change:+.0%} vs best: ")
        assert r.kept == (change > 0.03)
    lines = speed.results_table(results).splitlines()[1:]
    for line, r in zip(lines[1:], results[1:]):
        assert f"{r.images_per_second:,.0f}" in line and f"{r.best_per_second:,.0f}" in line


def test_tune_pairs_alternate_the_best_and_each_candidate():
    calls = []

    def fake(recipe):
        calls.append(recipe)
        return _fake_rate(recipe)

    steps = speed.tuning_steps(cpus=2, batch_sizes=(512,))[:2]
    speed.tune(TINY, "cpu", steps, pairs=2, measure_fn=fake)
    big = speed.Recipe(batch_size=512)
    workers = speed.Recipe(batch_size=512, num_workers=2)
    assert calls == [speed.NAIVE, speed.NAIVE, big, speed.NAIVE, big, big, workers, big, workers]


def test_compare_reports_medians_measured_side_by_side():
    calls = []

    def fake(recipe):
        calls.append(recipe)
        return [100.0, 300.0, 90.0, 280.0, 110.0, 330.0][len(calls) - 1]

    c = speed.compare(speed.NAIVE, speed.Recipe(batch_size=512), TINY, measure_fn=fake)
    assert calls[0] == speed.NAIVE and calls[1].batch_size == 512  # alternating
    assert (c.naive, c.tuned, c.speedup) == (100.0, 300.0, 3.0)
    with pytest.raises(ValueError, match="repeats=0"):
        speed.compare(speed.NAIVE, speed.NAIVE, TINY, repeats=0)


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


def test_plot_steps_draws_the_measured_steps():
    rows = [
        {"step": "a", "images_per_second": 10.0, "kept": True},
        {"step": "b", "images_per_second": None, "kept": False},
        {"step": "c", "images_per_second": 5.0, "kept": False},
    ]
    fig = speed.plot_steps(rows, "t")
    assert [b.get_width() for b in fig.axes[0].patches] == [5.0, 10.0]


def test_cuda_graphs_step_compiles_in_reduce_overhead_mode(monkeypatch):
    step = next(s for s in speed.tuning_steps(cpus=2) if s.name.startswith("CUDA graphs"))
    assert step.needs == "cuda" and not step.applies_to("cpu")
    assert step.changes == {"compile": True, "compile_mode": "reduce-overhead"}
    modes = []
    monkeypatch.setattr(torch, "compile", lambda model, mode=None: modes.append(mode) or model)
    speed.build(speed.Recipe(**step.changes), "cpu")
    speed.build(speed.Recipe(compile=True), "cpu")
    assert modes == ["reduce-overhead", None]


def test_lesson_08s_names_stay_importable_from_speed():
    from course_utils import hpc, profiling, throughput

    for module, names in (
        (throughput, ["Recipe", "NAIVE", "MemoryLoader", "make_loader", "build", "measure",
                      "time_loader", "backend_flags", "train_steps"]),
        (hpc, ["steady_allocator", "MALLOC_TUNABLES"]),
        (profiling, ["documentation_loop", "profile_lines", "line_report"]),
    ):  # fmt: skip
        for name in names:
            assert getattr(speed, name) is getattr(module, name), name
