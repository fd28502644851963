"""Lesson 10's jobs on the CI Slurm cluster (`.ci/slurm-cluster.sh start`), end to end, through
the same functions the notebook calls: the staging step with the solution's function on 2 nodes
x 2 tasks (one copy per node); the solution's scaling script at 2 nodes x 2 tasks as a GPU job,
a GPU per task (--gpus-per-node=2 on sbatch's command line) on the cluster's 4 GPUs per node
(GRES, no driver: the tasks train on the CPU), so that what Slurm gives each task answers the
lab's GPU decision; the sweep as a CPU job (the script's CPU variant: no GPU option at all) in a
throttled array; sacct's record of each, the run's summary in its comment among it.

The jobs are submitted together when the first test needs them (the CPU sweep just after, with
COURSE_DEVICE=cpu); each test reads its own. One CPU per task: the cluster's nodes share 2 cores.
"""

import concurrent.futures

import pytest
from lab_answers import load

from course_utils import accounting, batch, witness
from course_utils.device import TaskView, plan_ranks
from course_utils.lab import cluster, run_records, small_files, staging, transport

SLURM = batch.Launcher("slurm", "the test asks for it")
pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lab-slurm")
    answers = load(folder)
    data, records = folder / "data", folder / "records"
    small_files.write_dataset(data, images=128)
    script = folder / "lab_scaling_yours.sh"
    script.write_text(answers.scaling_script())
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("COURSE_DEVICE", raising=False)  # the GPU request of the script's header
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            staged = pool.submit(
                cluster.stage_and_measure, SLURM, data, folder / "staging", answers.stage_dataset
            )
            scaled = pool.submit(
                cluster.scaling,
                SLURM,
                data,
                records,
                shapes=[batch.Shape(2, 2)],
                steps=2,
                cpus_per_task=1,
                script=script,
            )
            done = {"staging": staged.result(), "scaling": scaled.result()}
        patch.setenv("COURSE_DEVICE", "cpu")  # the CPU variant: no GPU option at all
        done["sweep"] = cluster.sweep(
            SLURM, data, records, [0.02, 0.1], throttle=2, steps=2, cpus_per_task=1, script=script
        )
    return folder, done, script.read_text()


def test_the_learners_staging_function_makes_one_copy_per_node(jobs):
    folder, done, _ = jobs
    assert done["staging"].ok, done["staging"].tail(30)
    results = staging.load_results(folder / "staging")
    assert [r["node"] for r in results] == ["cn1", "cn1", "cn2", "cn2"]
    assert staging.copies_per_node(results) == {"cn1": 1, "cn2": 1}
    assert {r["digest"] for r in results} == {small_files.content_digest(images=128)}
    assert len({r["answer"] for r in results}) == 1  # every task ran the one function
    assert sorted(r["node"] for r in results if "readings" in r) == ["cn1", "cn2"]


def test_a_gpu_job_gives_every_task_its_nodes_gpus_and_the_lab_decides_nccl(jobs):
    """The script asks --gpus-per-node=1 for its one task; the study asks --gpus-per-node=2 for
    2 tasks per node. Every task of a node sees both GPUs (CUDA_VISIBLE_DEVICES=0,1), so each
    rank takes cuda:LOCAL_RANK and can reach the other's. The cluster's GPUs have no driver, so
    the ranks train on the CPU; the lab's rule on the views Slurm gave, with a UUID standing for
    each GPU, is a GPU of its own per rank and nccl, whatever Slurm confines."""
    folder, done, text = jobs
    (run,) = done["scaling"]
    assert run.ok, run.tail(30)
    record = next(r for r in run_records.load(folder / "records", "scaling"))
    assert (record["node_names"], record["backend"]) == (["cn1", "cn2"], "gloo")
    seen = {(d["node"], d["local_rank"]): d["visible"] for d in record["devices"]}
    assert set(seen.values()) == {"0,1"}, seen
    assert {d["node_gpus"] for d in record["devices"]} == {2}
    views = [
        TaskView(
            d["node"],
            d["local_rank"],
            tuple(f"GPU-{d['node']}-{i}" for i in d["visible"].split(",")),
            d["visible"],
            d["node_gpus"],
            constrained=True,
        )
        for d in record["devices"]
    ]
    plans = [plan_ranks(views, rank) for rank in range(4)]
    assert [(str(p.device), p.backend) for p in plans] == [
        ("cuda:0", "nccl"),
        ("cuda:1", "nccl"),
    ] * 2
    (job,) = [s for s in accounting.ended_job_steps(record["label"]["job"]) if not s.is_step]
    assert job.alloc_tres.get("gres/gpu") == "4" and job.name == cluster.job_name("2x2", text)
    # rank 0 left the run's summary in the job's record: what the lesson and its judge read
    kept = accounting.job_record(record["label"]["job"])
    summary = run_records.from_comment(witness.from_job_record(kept.comment))
    assert (summary["name"], summary["configuration"]["ranks"]) == ("2x2", 4)
    assert summary["losses"] == [round(x, 6) for x in record["losses"][:5]]
    assert summary["throughput"] == round(record["throughput"], 1)
    assert kept.nodelist == "cn[1-2]" and kept.started <= kept.ended
    log = (folder / "records" / "logs" / "2x2.log").read_text()
    assert len(transport.links(log)) == 12 and transport.diagnose(log) == "socket"
    assert "from slurm" in log  # ranks from SLURM_PROCID & co, started by srun


def test_a_cpu_sweep_asks_for_no_gpu_and_is_one_throttled_array(jobs):
    folder, done, _ = jobs
    (array,) = done["sweep"]
    assert array.ok, array.tail(30)
    records = run_records.load(folder / "records", "sweep")
    assert sorted(r["configuration"]["lr"] for r in records) == [0.02, 0.1]
    job_ids = {r["label"]["job"].split("_")[0] for r in records}
    assert len(job_ids) == 1  # one array, two tasks
    for r in records:
        # slurmdbd records a task a moment after it leaves the queue: read the settled record.
        record = accounting.ended_job_steps(r["label"]["job"])
        steps = [s for s in record if not s.is_step]
        assert steps and "gres/gpu" not in steps[0].alloc_tres, steps
        assert [d["visible"] for d in r["devices"]] in ([""], [None])
        efficiency = accounting.efficiency(record)
        assert efficiency.state == "COMPLETED" and efficiency.cpu is not None
