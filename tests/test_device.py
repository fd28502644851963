"""course_utils.device: every branch of the one device and backend rule, with the hardware's and
Slurm's answers injected: GPU counts, and what each task of a job sees under each binding."""

import shutil
import types

import pytest
import torch

from course_utils import device
from course_utils.device import (
    ROUTES,
    TaskView,
    local_device,
    pick_device,
    plan_device,
    plan_ranks,
    requires,
    synchronize,
)


@pytest.mark.parametrize(
    ("local_rank", "local_world_size", "gpus", "device", "shares"),
    [
        (0, 1, 0, "cpu", False),  # a laptop
        (0, 1, 1, "cuda:0", False),  # a one-GPU job
        (3, 4, 4, "cuda:3", False),  # one GPU per local rank
        (1, 2, 8, "cuda:1", False),  # more GPUs than ranks: each rank its own
        (0, 2, 1, "cuda:0", True),  # two ranks, one GPU (the lesson 05 demo on a 1-GPU node)
        (1, 2, 1, "cuda:0", True),
        (3, 4, 2, "cuda:1", True),  # round-robin over the GPUs there are
        (1, 2, 0, "cpu", False),  # CPU ranks never "share" a device
    ],
)
def test_plan_device_for_each_hardware(local_rank, local_world_size, gpus, device, shares):
    plan = plan_device(local_rank, local_world_size, gpus=gpus)
    assert plan.device == torch.device(device)
    assert bool(plan.note) == shares == plan.shares_gpu
    if shares:
        assert f"{local_world_size} processes on this node share {gpus} GPU(s)" in plan.note
        assert "gloo" in plan.note


def test_choices_win_over_the_hardware():
    assert plan_device(0, 1, "cpu", gpus=4).device == torch.device("cpu")
    assert plan_device(1, 2, "cuda", gpus=2).device == torch.device("cuda:1")
    assert plan_device(0, 1, None, gpus=0, mps=True).device == torch.device("mps")
    pinned = plan_device(1, 2, "cuda:1", gpus=2)  # every rank on the one named GPU
    assert pinned.device == torch.device("cuda:1") and "share" in pinned.note


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"choice": "cuda:1", "gpus": 1, "source": "COURSE_DEVICE"}, r"COURSE_DEVICE='cuda:1'"),
        ({"choice": "cuda", "gpus": 0}, r"prefer='cuda' asks for a device .* choose 'cpu'"),
        ({"choice": "mps"}, r"0 mps device"),
        ({"local_rank": 2, "local_world_size": 2}, r"local rank 2 of 2 .*LOCAL_RANK"),
        ({"local_rank": 0, "local_world_size": 0}, r"SLURM_LOCALID"),
    ],
)
def test_impossible_requests_name_the_value_and_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_device(**kwargs)


# ---- each binding, as the tasks of one node see it -------------------------------------------
# Two tasks on cn1 of a node with GPUs GPU-a and GPU-b; CUDA_VISIBLE_DEVICES as Slurm set it.


def node(*uuids_per_task, visible=None, constrained=None, exclusive=False, name="cn1"):
    return [
        TaskView(name, k, tuple(u), v, 2, constrained, exclusive)
        for k, (u, v) in enumerate(zip(uuids_per_task, visible or [None] * len(uuids_per_task)))
    ]


def plans(views):
    return [plan_ranks(views, r) for r in range(len(views))]


@pytest.mark.parametrize("constrained", [True, False, None])
def test_gpus_per_node_every_task_sees_the_nodes_gpus_so_nccl(constrained):
    """--gpus-per-node=2 --ntasks-per-node=2: both tasks CUDA_VISIBLE_DEVICES=0,1; each rank
    takes cuda:LOCAL_RANK, and reaches the other's GPU whatever the cgroup holds."""
    views = node(("GPU-a", "GPU-b"), ("GPU-a", "GPU-b"), visible=["0,1", "0,1"])
    views = [TaskView(**{**v.__dict__, "constrained": constrained}) for v in views]
    got = plans(views)
    assert [(str(p.device), p.uuid, p.backend) for p in got] == [
        ("cuda:0", "GPU-a", "nccl"),
        ("cuda:1", "GPU-b", "nccl"),
    ]
    assert got[1].why.endswith("the node's ranks see each other's GPUs): nccl")
    assert not any(p.note or p.ask or p.shares_gpu for p in got)


def test_gpus_per_task_where_slurm_confines_devices_is_gloo_and_says_what_to_ask():
    """--gpus-per-task=1 alone with ConstrainDevices=yes: each task's cgroup holds its own GPU,
    CUDA IPC between the tasks fails (NVIDIA/nccl#1066), so no nccl."""
    views = node(("GPU-a",), ("GPU-b",), visible=["0", "1"], constrained=True)
    got = plans(views)
    assert [(str(p.device), p.uuid, p.backend) for p in got] == [
        ("cuda:0", "GPU-a", "gloo"),
        ("cuda:0", "GPU-b", "gloo"),
    ]
    assert all(p.ask == ROUTES for p in got) and not any(p.shares_gpu for p in got)
    assert "ConstrainDevices=yes" in got[0].note and "CUDA IPC between them fails" in got[0].note
    for route in ("--gpus-per-node=N", "--gpu-bind=none", "allow-task-sharing"):
        assert route in got[0].note


def test_gpus_per_task_where_devices_are_not_confined_reaches_the_other_gpu():
    """--gpus-per-task=1 with ConstrainDevices=no (the course's CI cluster): each task sees one
    GPU, but CUDA IPC opens the other's (CUDA 10.1 and later), so nccl."""
    views = node(("GPU-a",), ("GPU-b",), visible=["0", "1"], constrained=False)
    assert {(str(p.device), p.backend) for p in plans(views)} == {("cuda:0", "nccl")}
    assert "devices are not confined" in plans(views)[0].why


def test_gpus_per_task_where_confinement_is_not_known_takes_no_chance():
    views = node(("GPU-a",), ("GPU-b",), visible=["0", "1"], constrained=None)
    got = plans(views)
    assert {p.backend for p in got} == {"gloo"} and got[0].ask == ROUTES
    assert "not known here" in got[0].note


@pytest.mark.parametrize("constrained", [True, None])
def test_gpus_per_task_with_gpu_bind_none_or_task_sharing_sees_the_nodes_gpus(constrained):
    """--gpus-per-task=1 with srun --gpu-bind=none, or --gres-flags=allow-task-sharing: every
    task sees the job's GPUs of its node (allow-task-sharing keeps each task's own first)."""
    bind_none = node(("GPU-a", "GPU-b"), ("GPU-a", "GPU-b"), constrained=constrained)
    assert [(str(p.device), p.backend) for p in plans(bind_none)] == [
        ("cuda:0", "nccl"),
        ("cuda:1", "nccl"),
    ]
    sharing = node(("GPU-a", "GPU-b"), ("GPU-b", "GPU-a"), constrained=constrained)
    got = plans(sharing)
    assert [(p.uuid, p.backend) for p in got] == [("GPU-a", "nccl"), ("GPU-b", "nccl")]


def test_one_rank_per_node_is_nccl_whatever_the_binding():
    views = node(("GPU-a",), constrained=True) + node(("GPU-c",), constrained=True, name="cn2")
    assert {(str(p.device), p.backend) for p in plans(views)} == {("cuda:0", "nccl")}
    assert "one rank per node" in plans(views)[1].why


def test_ranks_that_share_a_gpu_use_gloo_and_say_so_once_per_node():
    """--gres=gpu:1 with 2 tasks (slurm/mps_job.sh's way): both tasks see GPU-a."""
    views = node(("GPU-a",), ("GPU-a",), visible=["0", "0"], constrained=True)
    views += node(("GPU-c",), ("GPU-d",), visible=["0", "1"], constrained=False, name="cn2")
    got = plans(views)
    assert {p.backend for p in got} == {"gloo"}
    assert [p.shares_gpu for p in got] == [True, True, False, False]
    assert got[0].note.startswith("2 processes on this node share 1 GPU(s): local rank 0")
    assert got[0].ask == "--gpus-per-node=2 with --ntasks-per-node=2 (a GPU per task)"
    assert got[2].why.startswith("a GPU of its own, but ranks of ['cn1'] share GPUs")


def test_exclusive_process_mode_admits_one_process_per_gpu():
    """Ranks that would share an exclusive-process GPU cannot (the second fails: busy or
    unavailable): the CPU; ranks with a GPU each are unaffected."""
    shared = plans(node(("GPU-a",), ("GPU-a",), visible=["0", "0"], exclusive=True))
    assert {(str(p.device), p.backend) for p in shared} == {("cpu", "gloo")}
    assert "exclusive-process mode" in shared[0].note and "MPS" in shared[0].note
    own = plans(node(("GPU-a", "GPU-b"), ("GPU-a", "GPU-b"), exclusive=True, constrained=True))
    assert [(str(p.device), p.backend) for p in own] == [("cuda:0", "nccl"), ("cuda:1", "nccl")]
    assert plan_device(1, 2, gpus=1, exclusive=True).device == torch.device("cpu")


def test_a_rank_without_a_gpu_makes_the_job_gloo():
    views = [TaskView("a", 0, ("GPU-a",)), TaskView("b", 0)]
    assert [(str(p.device), p.backend) for p in plans(views)] == [
        ("cuda:0", "gloo"),
        ("cpu", "gloo"),
    ]
    assert plans(views)[0].why == "some rank has no GPU: gloo"
    assert plans(views)[1].why == "the CPU (no GPU here): gloo"
    with pytest.raises(ValueError, match="rank 2 is not among the 2 views gathered"):
        plan_ranks(views, 2)


def test_counts_alone_are_the_rule_on_identical_views():
    for ranks_, gpus in [(1, 0), (2, 1), (4, 4), (4, 2), (2, 8)]:
        uuids = tuple(f"GPU-{i}" for i in range(gpus))
        views = [TaskView("n", r, uuids) for r in range(ranks_)]
        for r in range(ranks_):
            assert plan_ranks(views, r) == plan_device(r, ranks_, gpus=gpus)


# ---- what this task sees -------------------------------------------------------------------


def test_a_tasks_view_from_cudas_and_slurms_answers():
    environ = {"CUDA_VISIBLE_DEVICES": "2,3", "SLURM_GPUS_ON_NODE": "4"}
    seen = device.task_view("cn1", 1, environ, 2, {0: "GPU-x", 1: "GPU-y"}.get, constrained=True)
    assert seen == TaskView("cn1", 1, ("GPU-x", "GPU-y"), "2,3", 4, True)
    old = device.task_view("cn1", 0, environ, 2, lambda i: None)  # a PyTorch without UUIDs
    assert old.uuids == ("cn1/cuda-visible-2", "cn1/cuda-visible-3")
    none = device.task_view("cn1", 0, {}, 0, lambda i: "never")
    assert (none.uuids, none.visible, none.node_gpus) == ((), None, None)
    assert TaskView.from_dict(seen.as_dict()) == seen


def test_whether_slurm_confines_devices_comes_from_scontrol(fake_commands, monkeypatch):
    assert device.constrains_devices("ConstrainCores          = no\nConstrainDevices        = yes")
    assert device.constrains_devices("ConstrainDevices = no\n") is False
    assert device.constrains_devices("SLURM_VERSION = 22.05.8") is None
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    fake = fake_commands({"scontrol show config": "ConstrainDevices        = yes\n"})
    assert device.slurm_constrains_devices({}) is False and fake.calls == []  # no job: nothing
    assert device.slurm_constrains_devices({"SLURM_JOB_ID": "7"}) is True
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert device.slurm_constrains_devices({"SLURM_JOB_ID": "7"}) is None


def test_this_task_asks_slurm_and_nvidia_smi_only_where_it_sees_gpus(
    fake_gpus, fake_commands, monkeypatch
):
    fake_gpus(0)
    fake = fake_commands({})
    assert device.this_task("cn1", 0, environ={"SLURM_JOB_ID": "7"}) == TaskView("cn1", 0)
    assert fake.calls == []
    fake_gpus(1)
    props = types.SimpleNamespace(uuid="1a2b")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    fake_commands(
        {
            "nvidia-smi --query-gpu=index,uuid,name,compute_mode": (
                "0, GPU-1a2b, NVIDIA H100, Exclusive_Process\n"
            ),
            "scontrol show config": "ConstrainDevices = yes\n",
        }
    )
    environ = {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "3", "SLURM_GPUS_ON_NODE": "4"}
    seen = device.this_task("cn1", 1, environ=environ)
    assert seen == TaskView("cn1", 1, ("GPU-1a2b",), "3", 4, True, True)
    assert device.this_task("cn1", 1, use_gpus=False, environ=environ).uuids == ()


def test_local_device_reads_the_hardware(fake_gpus, capsys):
    fake_gpus(4)
    assert local_device(2, 4) == torch.device("cuda:2")
    fake_gpus(0)
    assert local_device(1, 2) == torch.device("cpu")
    assert capsys.readouterr().out == ""


def test_local_plan_takes_the_gathered_views(fake_gpus, capsys):
    fake_gpus(1)  # what this process counts; the views say more
    views = [TaskView("cn1", k, (f"GPU-{k}",), str(k), 2, True) for k in range(2)]
    plan = device.local_plan(0, 2, views=views, rank=0)
    assert (plan.backend, plan.ask) == ("gloo", ROUTES)
    assert capsys.readouterr().out.startswith("each rank has a GPU of its own, but the ranks")


def test_sharing_is_said_once_per_node(fake_gpus, capsys):
    fake_gpus(1)
    assert local_device(0, 2) == local_device(1, 2) == torch.device("cuda:0")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("2 processes on this node share 1 GPU(s)")


def test_course_device_overrides_prefer_and_hardware(fake_gpus, monkeypatch):
    fake_gpus(2)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert local_device(1, 2, prefer="cuda") == torch.device("cpu")
    monkeypatch.setenv("COURSE_DEVICE", "cuda:5")
    with pytest.raises(ValueError, match=r"COURSE_DEVICE='cuda:5' .*2 cuda device"):
        local_device()


def test_pick_device_is_local_device_of_a_single_process(fake_gpus):
    fake_gpus(3)
    assert pick_device() == local_device(0, 1) == torch.device("cuda:0")
    assert pick_device(prefer="cpu") == torch.device("cpu")


def test_unknown_kind_is_a_value_error():
    with pytest.raises(ValueError, match="'tpu' is not one of"):
        requires("tpu")


def test_requires_cpu_is_silent(capsys):
    assert requires("cpu") is True
    assert capsys.readouterr().out == ""


def test_requires_prints_visible_skip_line(fake_gpus, capsys):
    fake_gpus(1)
    assert requires("cuda", count=2) is False
    assert capsys.readouterr().out == "skipped here: needs 2 CUDA GPUs, found 1\n"
    fake_gpus(0)
    assert requires("cuda") is False
    assert capsys.readouterr().out == "skipped here: needs 1 CUDA GPU, found none\n"


@pytest.mark.gpu
def test_requires_cuda_on_gpu_machine():
    assert requires("cuda") is True
    assert pick_device() == torch.device("cuda:0")
    x = torch.ones(1000, device=pick_device()) * 2
    synchronize("cuda")
    assert x.sum().item() == 2000
