"""scaling: speed-up, parallel efficiency and the rule for how many GPUs to ask for (lesson 10)."""

import matplotlib

matplotlib.use("Agg")

import re  # noqa: E402

import pytest  # noqa: E402
from lab_fixtures import record, study  # noqa: E402

from course_utils import accounting, how_many  # noqa: E402
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
    assert scaling.ranks_to_ask(rows).why == (
        "the most GPUs that keep 80% efficiency; 4 ranks (1x4) reach only 60%"
    )
    good = scaling.scaling_rows(study({"1x2": 0.9, "1x4": 0.9, "2x2": 0.85}))
    assert "measure more ranks" in scaling.ranks_to_ask(good).why
    with pytest.raises(ValueError, match="min_efficiency=0 must be in"):
        scaling.ranks_to_ask(rows, 0)


@pytest.mark.parametrize("deadline", [None, 0.2, 0.1, 0.05, 0.001])
def test_the_decision_is_how_many_choose_on_the_best_rate_per_count(deadline):
    """One rule for lessons 08 and 10: lesson 10 applies how_many.choose to its runs, the
    faster of two shapes with as many ranks standing for the count."""
    rows = scaling.scaling_rows(study({"1x2": 0.9, "1x4": 0.7, "2x2": 0.85}))
    assert scaling.rates(rows) == pytest.approx({1: 1000.0, 2: 1800.0, 4: 3400.0})
    choice = how_many.choose(scaling.rates(rows), scaling.WORK, deadline)
    decision = scaling.ranks_to_ask(rows, deadline_hours=deadline)
    assert decision.ranks == choice.gpus and choice.why in decision.why
    assert decision.name == {1: "1x1", 2: "1x2", 4: "2x2"}[decision.ranks]


def test_the_sweeps_best_learning_rate_is_its_lowest_last_loss():
    runs = [record(f"lr-{lr}", study="sweep", lr=lr) for lr in (0.02, 0.1, 0.3)]
    for run, loss in zip(runs, (2.1, 1.4, 1.9)):
        run["loss"]["last"] = loss
    assert scaling.best_lr(runs) == 0.1
    with pytest.raises(ValueError, match="no sweep records"):
        scaling.best_lr([])


SACCT = """\
12|lab-1x2-ab12cd34|COMPLETED|0:0|00:00:10|2|4000M||00:00:12|billing=2,cpu=2,mem=4000M,node=1|1|
12.batch|batch|COMPLETED|0:0|00:00:10|2||3188K|00:00:01|cpu=2,mem=4000M,node=1|1|1
12.0|python|COMPLETED|0:0|00:00:09|2||409600K|00:00:11|cpu=2,mem=4000M,node=1|1|2
13_0|lab-sweep-ab12cd34|COMPLETED|0:0|00:00:20|1|2000M||00:00:15|billing=1,cpu=1,mem=2000M,node=1|1|
13_0.0|python|COMPLETED|0:0|00:00:19|1||204800K|00:00:15|cpu=1,mem=2000M,node=1|1|1
13_1|lab-sweep-ab12cd34|COMPLETED|0:0|00:00:20|1|2000M||00:00:10|billing=1,cpu=1,mem=2000M,node=1|1|
"""


def test_the_jobs_efficiency_as_seff_computes_it_from_sacct():
    jobs = scaling.per_job(accounting.parse_sacct(SACCT))
    assert sorted(jobs) == ["12", "13_0", "13_1"]  # an array's tasks are jobs of their own
    table = scaling.jobs_table([(job, accounting.efficiency(steps)) for job, steps in jobs.items()])
    lines = table.splitlines()
    # 12: 12 s of CPU over 10 s x 2 CPUs; 400 MB x 2 tasks of 4000 MB
    assert re.split(r"\s{2,}", lines[1]) == [
        "12",
        "12",
        "COMPLETED",
        "10",
        "2",
        "60%",
        "800",
        "4000",
        "20%",
    ]
    assert lines[3].split()[-4:] == ["50%", "-", "2000", "-"]  # no step with a peak: no figure


def test_table_and_plot_from_records():
    rows = scaling.scaling_rows(study({"1x2": 0.9, "1x4": 0.75, "2x2": 0.6}))
    text = scaling.table(rows)
    header = "run  nodes  ranks  img/step  mean ms  images/s  median ms"
    assert text.splitlines()[0].startswith(header)
    assert "2x2" in text and "60%" in text and text.endswith(scaling.TABLE_KEY)
    figure = scaling.plot(rows)
    speed, eff = figure.axes
    assert speed.get_xlabel().startswith("ranks") and eff.get_ylabel() == "parallel efficiency (%)"
    assert list(eff.lines[0].get_ydata()) == pytest.approx([100, 90, 75, 60])


def test_a_rows_columns_reconcile():
    """images/s = images per step / the slowest rank's mean step; the median is another figure."""
    records = study({"1x2": 0.9})
    records[1]["throughput"], records[1]["step_time"] = 1572.0, 0.0442  # a median below the mean
    row = scaling.scaling_rows(records)[1]
    assert row.per_step == 64 and row.mean_step == pytest.approx(64 / 1572)
    cells = scaling.table([row]).splitlines()[1].split()
    assert cells[3:7] == ["64", "40.7", "1572", "44.2"]
    assert float(cells[3]) / (float(cells[4]) / 1e3) == pytest.approx(1572, rel=1e-3)


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
        re.split(r"\s{2,}", line) for line in scaling.table([one, two]).splitlines()[:3]
    )
    assert header[-2:] == ["energy", "kJ per 1,000,000 img"]
    assert first[-2:] == ["not reported", "not reported"]
    assert second[-2:] == ["640 J (nvml)", "1,250.0"]
