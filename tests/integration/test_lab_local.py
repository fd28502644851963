"""Lesson 10 without Slurm, as on a laptop or in the grading sandbox: the lab's steps run on
this machine, one forked process per rank (two groups of ranks for two emulated nodes), and
every record is validated."""

import json
import os

import pytest

from course_utils import batch
from course_utils.lab import cluster, run_records, small_files, staging, transport

LOCAL = batch.Launcher("local", "the test asks for it")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lab-data")
    small_files.write_dataset(folder, images=128)
    return folder


def test_scaling_on_one_node_and_two_emulated_nodes(data, tmp_path):
    runs = cluster.scaling(
        LOCAL, data, tmp_path, shapes=[batch.Shape(1, 1), batch.Shape(2, 2)], steps=2
    )
    assert [r.ok for r in runs] == [True, True], "\n".join(r.tail(20) for r in runs)
    one, two = run_records.load(tmp_path, "scaling")  # load validates every record
    assert (two["name"], two["node_names"], two["backend"]) == ("2x2", ["node0", "node1"], "gloo")
    assert two["staging"]["copies"] == {"node0": 1, "node1": 1}  # one copy per emulated node
    assert (two["label"]["launcher"], one["configuration"]["threads_per_rank"]) == ("local", 1)
    assert two["transport"] == "socket" and two["allreduce"]["busbw"] > 0
    log = (tmp_path / "logs" / "2x2.log").read_text()
    assert len(transport.links(log)) == 12  # each of 4 ranks names its 3 peers
    assert transport.allreduce_results(log)[0].ranks == 4
    # the last rank of each node removed the node's copy (local jobs are named after this pid)
    base = staging.local_base(os.environ).path
    assert not list(base.glob(f"course-lab-local-{os.getpid()}-*"))


def test_the_sweep_runs_its_tasks_throttled(data, tmp_path):
    runs = cluster.sweep(LOCAL, data, tmp_path, [0.05, 0.1], throttle=2, steps=2)
    assert all(r.ok for r in runs), "\n".join(r.tail(20) for r in runs)
    records = run_records.load(tmp_path, "sweep")
    assert sorted(r["configuration"]["lr"] for r in records) == [0.05, 0.1]
    assert {r["name"] for r in records} == {"lr-0.05", "lr-0.1"}


def test_the_staging_step_runs_on_two_emulated_nodes_and_times_four_reads(data, tmp_path):
    run = cluster.stage_and_measure(LOCAL, data, tmp_path)
    assert run.ok, run.tail(20)
    results = staging.load_results(tmp_path)
    assert staging.copies_per_node(results) == {"node0": 1, "node1": 1}
    assert {r["digest"] for r in results} == {small_files.content_digest(images=128)}
    readers = [r for r in results if "readings" in r]  # the first rank of each node
    assert sorted(r["node"] for r in readers) == ["node0", "node1"]
    assert sorted(readers[0]["readings"]) == sorted(
        ["shared files", "shared archive", "local files", "local archive"]
    )
    assert readers[0]["readings"]["shared files"]["files"] == 128
    assert not json.loads((tmp_path / "rank0.json").read_text())["path"].endswith(".partial")
    # the last rank of each node removed the node's copy (local jobs are named after this pid)
    base = staging.local_base(os.environ).path
    assert not list(base.glob(f"course-lab-local-{os.getpid()}-*"))


def test_a_stub_stages_nothing(data, tmp_path):
    def stage_dataset(archive, environ):
        raise NotImplementedError("Exercise 10.1")

    assert cluster.stage_and_measure(LOCAL, data, tmp_path, stage_dataset) is None
    assert not list(tmp_path.glob("rank*.json"))
    none = cluster.study(LOCAL, lambda: stage_dataset(None, None), data, tmp_path / "records")
    assert (none.runs, none.note) == ((), "scaling_script is not written yet: nothing ran")
