"""lab_records: every run of lesson 10 writes one labelled record; invalid ones are refused."""

import json

import pytest
from lab_fixtures import record

from course_utils.lab import run_records


def test_a_complete_record_is_valid():
    assert run_records.validate(record("2x2")) == []


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda r: r.update(record="other"), "not a course-lab-run record"),
        (lambda r: r.update(study="benchmark"), "study 'benchmark' is not one of"),
        (lambda r: r["label"].pop("commit"), "label lacks commit"),
        (lambda r: r["label"].update(launcher="mpirun"), "launcher 'mpirun' is not one of"),
        (lambda r: r["configuration"].update(ranks=3), "ranks=3 is not nodes x ranks_per_node"),
        (lambda r: r.update(node_names=["cn1"]), "2 node(s) in the configuration, ['cn1']"),
        (lambda r: r.update(throughput=0), "throughput is 0 images/s"),
        (lambda r: r.update(step_time="fast"), "step_time is 'fast', not a number >= 0"),
        (lambda r: r.update(communication_share=1.5), "communication_share=1.5 is above 1"),
        (lambda r: r["energy"].update(joules=12.0), "joules go with a source"),
        (lambda r: r["energy"].update(source="guess"), "energy source 'guess' is not one of"),
        (lambda r: r.update(utilisation={}), "utilisation has no 'cpu_percent'"),
        (
            lambda r: r["staging"].update(copies={"cn1": 2, "cn2": 1}),
            "expected one on each of the nodes ['cn1', 'cn2']",
        ),
    ],
)
def test_each_problem_is_named(change, problem):
    broken = record("2x2")
    change(broken)
    assert any(problem in p for p in run_records.validate(broken)), run_records.validate(broken)


def test_save_and_load_round_trip_sorted_by_ranks(tmp_path):
    for name in ("2x2", "1x1", "1x2"):
        path = run_records.save(record(name), tmp_path)
        assert path == tmp_path / "scaling" / f"{name}.json"
    run_records.save(record("lr-0.1", study="sweep"), tmp_path)
    assert [r["name"] for r in run_records.load(tmp_path, "scaling")] == ["1x1", "1x2", "2x2"]
    assert len(run_records.load(tmp_path)) == 4
    assert not list(tmp_path.rglob(".*.tmp"))  # written atomically, no temp file left


def test_save_refuses_an_invalid_record(tmp_path):
    broken = record("1x2")
    broken["throughput"] = -1
    with pytest.raises(ValueError, match=r"record '1x2' is not valid: throughput is -1"):
        run_records.save(broken, tmp_path)


def test_load_names_the_file_that_is_not_a_valid_record(tmp_path):
    (tmp_path / "scaling").mkdir()
    (tmp_path / "scaling" / "bad.json").write_text(json.dumps({"record": "other"}))
    with pytest.raises(ValueError, match=r"bad\.json is not a valid record: not a course-lab"):
        run_records.load(tmp_path)
    (tmp_path / "scaling" / "bad.json").write_text("{half")
    with pytest.raises(ValueError, match=r"bad\.json is not JSON .*delete it and run again"):
        run_records.load(tmp_path)


def test_label_names_the_machine_job_and_script(monkeypatch):
    monkeypatch.setenv("COURSE_COMMIT", "abc1234")  # no `git` process in the fast lane
    job = {"SLURM_JOB_ID": "51", "SLURM_CLUSTER_NAME": "course", "SLURM_JOB_NODELIST": "cn[1-2]"}
    label = run_records.label("slurm", job, cpu="AMD EPYC (2 CPUs)", script="abc")
    assert label["machine"] == "Slurm cluster 'course', nodes cn[1-2], AMD EPYC (2 CPUs)"
    assert (label["launcher"], label["job"], label["script"]) == ("slurm", "51", "abc")
    array = {**job, "SLURM_ARRAY_JOB_ID": "50", "SLURM_ARRAY_TASK_ID": "2"}
    assert run_records.label("slurm", array)["job"] == "50_2"
    assert run_records.label("local", {})["job"] is None
    assert run_records.label("local", {})["commit"] == "abc1234"


def test_a_run_leaves_a_summary_in_its_jobs_comment_that_reads_back():
    run = record("2x2", 3210.25, lr=0.1)
    run["losses"] = [2.3079123, 2.29, 2.28, 2.27, 2.26, 2.1, 2.0]
    text = run_records.to_comment(run)
    assert len(text) < 250  # a job's comment, not a file
    summary = run_records.from_comment(text)
    assert (summary["study"], summary["name"], summary["throughput"]) == ("scaling", "2x2", 3210.2)
    assert summary["configuration"] == {
        "nodes": 2,
        "ranks": 4,
        "ranks_per_node": 2,
        "batch_per_rank": 32,
        "steps": 8,
        "lr": 0.1,
        "device": "cpu",
    }
    assert summary["losses"] == [2.307912, 2.29, 2.28, 2.27, 2.26]  # the first five, to 1e-6
    assert summary["loss"] == {"last": 2.0, "first": pytest.approx(2.281582)}
    assert (summary["step_time"], summary["communication_share"]) == (0.05, 0.2)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "seed 5 sum 1.5",  # another course program's result
        "lab benchmark 1x1 nodes=1",  # not a study
        "lab scaling 1x1 nodes=1 ranks=1",  # cut short
        "lab scaling 1x3 nodes=2 ranks=3 batch=32 steps=8 lr=0.05 device=cpu images/s=1 step=1 "
        "comm=0 last=1 losses=1",  # 3 ranks on 2 nodes
        "lab scaling 1x1 nodes=1 ranks=1 batch=32 steps=8 lr=fast device=cpu images/s=1 step=1 "
        "comm=0 last=1 losses=1",
    ],
)
def test_any_other_comment_is_no_run_summary(text):
    assert run_records.from_comment(text) is None
