"""Lesson 10's GPU route on a GPU node (marked gpu: `make test-gpu`, or on its own:
`python -m pytest -m gpu tests/integration/test_lab_gpu.py`). Its ranks run on this machine
(the local route), one forked process per rank:

- 1 rank: its GPU, nccl, and the GPU it samples (utilisation, NVML energy) is the one it trains
  on, matched by UUID; its first losses are those the 10.2 check trains on the CPU, within the
  check's GPU tolerance;
- 2 ranks as torchrun starts them (every GPU visible): cuda:0 and cuda:1 and nccl on 2 GPUs or
  more, both on cuda:0 with gloo on one GPU (the plan says they share it);
- 2 ranks as Slurm's per-task binding starts them (each task's CUDA_VISIBLE_DEVICES one GPU of
  its own, as `--gpus-per-task=1` gives them): each rank on its cuda:0, different UUIDs, nccl,
  and NCCL's log names P2P or SHM. Needs 2 GPUs.
"""

import json

import pytest
import torch

from course_utils import batch, launching, nvidia
from course_utils.grading.checks import lesson10_cases
from course_utils.lab import cluster, run_records, small_files, transport
from course_utils.ranks import local_launch_environ

pytestmark = pytest.mark.gpu
LOCAL = batch.Launcher("local", "the test asks for it")
TWO_GPUS = pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs (per-task binding, nccl)"
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lab-gpu")
    small_files.write_dataset(folder / "data", images=256)
    shapes = [batch.Shape(1, 1), batch.Shape(1, 2)]
    runs = cluster.scaling(LOCAL, folder / "data", folder / "records", shapes=shapes, steps=8)
    assert all(r.ok for r in runs), "\n".join(r.tail(30) for r in runs)
    return folder, {r["name"]: r for r in run_records.load(folder / "records", "scaling")}


def test_one_rank_trains_on_its_gpu_and_samples_that_gpu(lab):
    _, records = lab
    one = records["1x1"]
    (rank,) = one["devices"]
    listed = {g.uuid: g.index for g in nvidia.gpus()}
    assert (one["configuration"]["device"], one["backend"]) == ("cuda", "nccl")
    assert rank["uuids"][0] in listed and rank["nvml_index"] == listed[rank["uuids"][0]]
    assert one["utilisation"]["gpu_percent"] is not None
    assert one["energy"]["source"] == "nvml" and one["energy"]["joules"] > 0


def test_the_checks_cpu_training_matches_a_gpu_run_within_its_tolerance(lab):
    _, records = lab
    config = records["1x1"]["configuration"]
    mine = lesson10_cases.first_losses(
        config["lr"], config["batch_per_rank"], run_records.COMMENT_LOSSES
    )
    got = records["1x1"]["losses"][: run_records.COMMENT_LOSSES]
    differences = [abs(a - b) for a, b in zip(got, mine)]
    print("largest difference of the first losses, GPU against the check's CPU:", max(differences))
    assert max(differences) < 5e-3


def test_two_ranks_with_every_gpu_visible(lab):
    folder, records = lab
    two = records["1x2"]
    log = (folder / "records" / "logs" / "1x2.log").read_text()
    uuids = [d["uuids"] for d in two["devices"]]
    if torch.cuda.device_count() >= 2:
        assert two["backend"] == "nccl" and uuids[0] == uuids[1]  # the same view, cuda:0 and 1
        assert transport.diagnose(log) in ("p2p", "shm"), log
    else:
        assert two["backend"] == "gloo" and "shares its GPU" in log, log


@TWO_GPUS
def test_per_task_binding_gives_each_rank_a_gpu_of_its_own_and_nccl(lab, tmp_path):
    """As srun starts the tasks of a --gpus-per-task=1 job: each sees one GPU, as cuda:0."""
    folder, _ = lab
    shape, port = batch.Shape(1, 2), launching.free_port()
    args = ["--data", str(folder / "data"), "--out", str(tmp_path), "--steps", "4"]
    environ = {**local_launch_environ().environ, "NCCL_DEBUG": "INFO"}
    tasks = [
        launching.Task(
            "course_utils.jobs.lab_train",
            tuple(args),
            {**batch.rank_environ(environ, shape, rank, port), "CUDA_VISIBLE_DEVICES": str(rank)},
        )
        for rank in range(2)
    ]
    log = tmp_path / "per_task.log"
    assert launching.run_programs(tasks, log, timeout=300) == 0, log.read_text()
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "scaling").glob("*.json")]
    seen = [d["uuids"] for d in record["devices"]]
    assert [len(s) for s in seen] == [1, 1] and seen[0] != seen[1], seen
    assert record["backend"] == "nccl", log.read_text()
    assert transport.diagnose(log.read_text()) in ("p2p", "shm")
