"""Lesson 10's jobs on the CI Slurm cluster (`.ci/slurm-cluster.sh start`), end to end, through
the same functions the notebook calls: the staging step on 2 nodes x 2 tasks (one copy per
node), the scaling job at 2 nodes x 2 tasks with gloo on the CPU, the sweep as a throttled
array, and exercise 10.2's check submitting the solution's script. Every record is validated.

The jobs are submitted together when the first test needs them; each test reads its own.
They run with COURSE_DEVICE=cpu and one CPU per task: the cluster's nodes share 2 cores.
"""

import concurrent.futures

import pytest
from lab_answers import load

from course_utils import batch
from course_utils.grading import run_check
from course_utils.lab import cluster, run_records, small_files, staging, transport

SLURM = batch.Launcher("slurm", "the test asks for it")


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lab-slurm")
    data = folder / "data"
    small_files.write_dataset(data, images=128)
    steps = {
        "staging": lambda: cluster.stage_and_measure(SLURM, data, folder / "staging"),
        "scaling": lambda: cluster.scaling(
            SLURM,
            data,
            folder / "records",
            steps=2,
            cpus_per_task=1,
            shapes=[batch.Shape(1, 1), batch.Shape(2, 2)],
        ),
        "sweep": lambda: cluster.sweep(
            SLURM, data, folder / "records", [0.02, 0.1, 0.3], throttle=2, steps=2, cpus_per_task=1
        ),
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COURSE_DEVICE", "cpu")  # sbatch exports it into the jobs
        with concurrent.futures.ThreadPoolExecutor(len(steps)) as pool:
            futures = {name: pool.submit(step) for name, step in steps.items()}
            done = {name: f.result() for name, f in futures.items()}
    return folder, done


@pytest.mark.slurm
def test_staging_makes_one_copy_per_node(jobs):
    folder, done = jobs
    assert done["staging"].ok, done["staging"].tail(30)
    results = staging.load_results(folder / "staging")
    assert [r["node"] for r in results] == ["cn1", "cn1", "cn2", "cn2"]
    assert staging.copies_per_node(results) == {"cn1": 1, "cn2": 1}
    assert {r["base_from"] for r in results} <= {"SLURM_TMPDIR", "TMPDIR", "/tmp"}
    readers = [r for r in results if "readings" in r]
    assert sorted(r["node"] for r in readers) == ["cn1", "cn2"]  # each node's first rank


@pytest.mark.slurm
def test_scaling_two_nodes_of_two_tasks_with_gloo(jobs):
    folder, done = jobs
    assert all(r.ok for r in done["scaling"]), "\n".join(r.tail(30) for r in done["scaling"])
    records = {r["name"]: r for r in run_records.load(folder / "records", "scaling")}
    assert sorted(records) == ["1x1", "2x2"]
    two = records["2x2"]
    assert (two["node_names"], two["backend"], two["configuration"]["ranks"]) == (
        ["cn1", "cn2"],
        "gloo",
        4,
    )
    assert two["staging"]["copies"] == {"cn1": 1, "cn2": 1}
    assert two["label"]["launcher"] == "slurm" and two["label"]["job"].isdigit()
    assert two["label"]["script"] == cluster.digest(cluster.SCRIPTS["scaling"].read_text())
    assert two["configuration"]["cpus_per_task"] == 1
    log = (folder / "records" / "logs" / "2x2.log").read_text()
    assert len(transport.links(log)) == 12 and transport.diagnose(log) == "socket"
    assert "from slurm" in log  # ranks from SLURM_PROCID & co, started by srun


@pytest.mark.slurm
def test_the_sweep_is_one_throttled_array(jobs):
    folder, done = jobs
    (array,) = done["sweep"]
    assert array.ok, array.tail(30)
    records = run_records.load(folder / "records", "sweep")
    assert sorted(r["configuration"]["lr"] for r in records) == [0.02, 0.1, 0.3]
    job_ids = {r["label"]["job"].split("_")[0] for r in records}
    tasks = sorted(r["label"]["job"].split("_")[1] for r in records)
    assert len(job_ids) == 1 and tasks == ["0", "1", "2"]  # one array, three tasks


@pytest.mark.slurm
def test_check_10_2_submits_the_solutions_script(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    monkeypatch.delenv(batch.LAUNCHER_VARIABLE, raising=False)
    answers = load(tmp_path)
    result = run_check("10.2", answers.scaling_script, tmp_path)
    assert result.passed and result.message.endswith("[via slurm]"), result.message
