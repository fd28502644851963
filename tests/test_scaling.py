"""scaling: speed-up, parallel efficiency and the rule for how many GPUs to ask for (lesson 10)."""

import matplotlib

matplotlib.use("Agg")

import re  # noqa: E402

import pytest  # noqa: E402
from lab_fixtures import record, study  # noqa: E402

from course_utils.lab import scaling  # noqa: E402


def test_efficiency_is_speedup_over_ranks():
    assert scaling.efficiency(1800, 1000, 2) == pytest.approx(0.9)
    assert scaling.efficiency(2200, 1000, 2) == pytest.approx(1.1)  # super-linear happens
    with pytest.raises(ValueError, match="baseline=0 must be > 0"):
        scaling.efficiency(10, 0, 2)


def test_rows_are_measured_against_the_one_rank_run():
    rows = scaling.scaling_rows(study({"1x2": 0.9, "1x4": 0.75, "2x2": 0.6}))
    assert [(r.name, r.ranks, r.nodes) for r in rows] == [
        ("1x1", 1, 1),
        ("1x2", 2, 1),
        ("1x4", 4, 1),
        ("2x2", 4, 2),
    ]
    assert [round(r.efficiency, 6) for r in rows] == [1.0, 0.9, 0.75, 0.6]
    assert rows[2].speedup == pytest.approx(3.0)
    assert rows[2].rank_hours == pytest.approx(rows[2].hours * 4)
    assert rows[0].hours == pytest.approx(scaling.WORK / 1000 / 3600)


def test_rows_need_exactly_one_baseline():
    with pytest.raises(ValueError, match=r"exactly one record of 1 rank.*found 0"):
        scaling.scaling_rows([record("1x2")])
    with pytest.raises(ValueError, match=r"found 2 \['1x1', '1x1'\]"):
        scaling.scaling_rows([record("1x1"), record("1x1")])


@pytest.mark.parametrize(
    "efficiencies, threshold, ranks, name",
    [
        ({"1x2": 0.95, "1x4": 0.85, "2x2": 0.4}, 0.8, 4, "1x4"),  # the cliff is the network
        ({"1x2": 0.95, "1x4": 0.7, "2x2": 0.85}, 0.8, 4, "2x2"),  # more efficient of the two
        ({"1x2": 0.9, "1x4": 0.6, "2x2": 0.5}, 0.8, 2, "1x2"),
        ({"1x2": 0.45, "1x4": 0.3, "2x2": 0.2}, 0.8, 1, "1x1"),
        ({"1x2": 0.45, "1x4": 0.3, "2x2": 0.2}, 0.4, 2, "1x2"),
    ],
)
def test_ranks_to_ask_is_the_most_that_stay_efficient(efficiencies, threshold, ranks, name):
    decision = scaling.ranks_to_ask(scaling.scaling_rows(study(efficiencies)), threshold)
    assert (decision.ranks, decision.name) == (ranks, name)


def test_the_decision_says_why():
    rows = scaling.scaling_rows(study({"1x2": 0.9, "1x4": 0.6, "2x2": 0.5}))
    assert scaling.ranks_to_ask(rows).why == "4 ranks (1x4) reach only 60% efficiency, below 80%"
    good = scaling.scaling_rows(study({"1x2": 0.9, "1x4": 0.9, "2x2": 0.85}))
    assert "measure more ranks" in scaling.ranks_to_ask(good).why
    with pytest.raises(ValueError, match="threshold=0 must be in"):
        scaling.ranks_to_ask(rows, 0)


def test_table_and_plot_from_records():
    rows = scaling.scaling_rows(study({"1x2": 0.9, "1x4": 0.75, "2x2": 0.6}))
    text = scaling.table(rows)
    assert text.splitlines()[0].startswith("run  nodes  ranks  images/s")
    assert "2x2" in text and "60%" in text
    figure = scaling.plot(rows)
    speed, eff = figure.axes
    assert speed.get_xlabel().startswith("ranks") and eff.get_ylabel() == "parallel efficiency (%)"
    assert list(eff.lines[0].get_ydata()) == pytest.approx([100, 90, 75, 60])


def test_sweep_table_is_sorted_by_learning_rate():
    runs = [record(f"lr-{lr}", study="sweep", lr=lr) for lr in (0.3, 0.02, 0.1)]
    lines = scaling.sweep_table(runs).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["lr-0.02", "lr-0.1", "lr-0.3"]


def test_energy_per_run_and_per_work_where_the_hardware_reported_it():
    records = study({"1x2": 0.9})
    records[1]["energy"] = {"joules": 640.0, "source": "nvml", "scope": "cuda:0 (NVML)"}
    one, two = scaling.scaling_rows(records)
    assert (one.joules, one.kilojoules_per_work) == (None, None)
    # 1x2 trained 32 images x 8 steps x 2 ranks = 512 images with 640 J: 1.25 J per image
    assert two.images == 512
    assert two.kilojoules_per_work == pytest.approx(1.25 * scaling.WORK / 1e3)
    header, first, second = (
        re.split(r"\s{2,}", line) for line in scaling.table([one, two]).splitlines()
    )
    assert header[-2:] == ["energy", "kJ per 1,000,000 img"]
    assert first[-2:] == ["not reported", "not reported"]
    assert second[-2:] == ["640 J (nvml)", "1,250.0"]
