"""lab.gpus: each rank's GPU and the job's backend, decided from what every task sees (lesson
10), with Slurm's and CUDA's answers injected. The views below are what the course's test
cluster's tasks reported (CUDA_VISIBLE_DEVICES per task, tests/integration/test_lab_slurm.py
runs them for real), with made-up UUIDs standing for the GPUs."""

import pytest

from course_utils import nvidia
from course_utils.lab import gpus


def view(node, local, *uuids, visible=None):
    return gpus.View(node, local, tuple(uuids), visible)


def test_per_task_binding_gives_every_rank_a_gpu_of_its_own_so_nccl():
    """--gpus-per-task=1 (Slurm 21.08+: per_task binding): each task sees one GPU, as cuda:0.
    Counting GPUs (1 per task, 2 ranks per node) would say "share" and pick gloo; the UUIDs
    say otherwise."""
    views = [
        view("cn1", 0, "GPU-a", visible="0"),
        view("cn1", 1, "GPU-b", visible="1"),
        view("cn2", 0, "GPU-c", visible="0"),
        view("cn2", 1, "GPU-d", visible="1"),
    ]
    plans = [gpus.plan(views, rank) for rank in range(4)]
    assert [p.device for p in plans] == ["cuda:0"] * 4
    assert [p.uuid for p in plans] == ["GPU-a", "GPU-b", "GPU-c", "GPU-d"]
    assert {p.backend for p in plans} == {"nccl"} and not any(p.shares for p in plans)
    assert plans[1].note == "a GPU of its own (sees 1 GPU(s), trains on cuda:0): nccl"


def test_a_cgroup_constrained_step_shows_every_task_cuda_visible_devices_0():
    """ConstrainDevices=yes: every task's CUDA_VISIBLE_DEVICES is 0, yet each is another GPU."""
    views = [view("cn1", 0, "GPU-a", visible="0"), view("cn1", 1, "GPU-b", visible="0")]
    assert [gpus.plan(views, r).backend for r in (0, 1)] == ["nccl", "nccl"]


def test_the_nodes_gpus_all_visible_give_local_rank_k_cuda_k():
    """torchrun's workers, or a job without per-task binding (or closest, which on the test
    cluster gave both tasks both GPUs): the same view on every rank of the node."""
    views = [view("n", k, "GPU-a", "GPU-b", visible="0,1") for k in range(2)]
    plans = [gpus.plan(views, r) for r in (0, 1)]
    assert [(p.device, p.uuid, p.backend) for p in plans] == [
        ("cuda:0", "GPU-a", "nccl"),
        ("cuda:1", "GPU-b", "nccl"),
    ]


def test_ranks_that_share_a_gpu_make_the_job_use_gloo():
    """--gpus-per-node=1 with 2 tasks (the test cluster: both tasks CUDA_VISIBLE_DEVICES=0, the
    same GPU): NCCL refuses two ranks on one GPU."""
    views = [view("cn1", k, "GPU-a", visible="0") for k in range(2)]
    views += [view("cn2", k, "GPU-c", "GPU-d") for k in range(2)]
    plans = [gpus.plan(views, r) for r in range(4)]
    assert {p.backend for p in plans} == {"gloo"}
    assert [p.shares for p in plans] == [True, True, False, False]
    assert plans[0].note.startswith("shares its GPU, but ranks of ['cn1'] share GPUs")
    assert plans[2].device == "cuda:0" and plans[3].device == "cuda:1"


def test_no_gpu_is_the_cpu_and_gloo():
    views = [view("n", k, visible="") for k in range(2)]  # COURSE_DEVICE=cpu clears it
    plan = gpus.plan(views, 1)
    assert (plan.device, plan.uuid, plan.backend) == ("cpu", None, "gloo")
    assert plan.note == "the CPU (no GPU here): gloo"
    mixed = [view("a", 0, "GPU-a"), view("b", 0)]
    assert gpus.plan(mixed, 0).backend == "gloo" and gpus.plan(mixed, 1).note.startswith("the CPU")
    with pytest.raises(ValueError, match="rank 2 is not among the 2 views"):
        gpus.plan(mixed, 2)


def test_a_tasks_view_from_cudas_answers():
    environ = {"CUDA_VISIBLE_DEVICES": "2,3"}
    seen = gpus.task_view("cn1", 1, environ, 2, {0: "GPU-x", 1: "GPU-y"}.get)
    assert seen == view("cn1", 1, "GPU-x", "GPU-y", visible="2,3")
    old = gpus.task_view("cn1", 0, environ, 2, lambda i: None)  # a PyTorch without UUIDs
    assert old.uuids == ("cn1/cuda-visible-2", "cn1/cuda-visible-3")
    none = gpus.task_view("cn1", 0, {}, 0, lambda i: "never")
    assert (none.uuids, none.visible) == ((), None)
    assert gpus.View.from_dict(seen.as_dict()) == seen


def test_each_rank_samples_the_gpu_it_trains_on_by_uuid():
    """nvidia-smi's index, not CUDA's: a task bound to the node's third GPU sees it as cuda:0."""
    listed = nvidia.parse_gpus(
        "0, GPU-a, NVIDIA H100, Default\n1, GPU-b, NVIDIA H100, Default\n"
        "2, GPU-c, NVIDIA H100, Default\n"
    )
    views = [view("n", 0, "GPU-c", visible="2")]
    assert gpus.nvml_index(gpus.plan(views, 0).uuid, listed) == 2
    assert gpus.nvml_index("GPU-z", listed) is None and gpus.nvml_index(None, listed) is None
