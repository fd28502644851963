"""ddp_jobs (lesson 05): where the lesson's ranks run, decided from the node's answers (injected
here: GPU count, compute modes, other processes), and the two jobs of exercise 05.3."""

import pytest

from course_utils import ddp_jobs
from course_utils.ddp_jobs import CPU_JOB, GPU_JOB

EXCLUSIVE = "Exclusive_Process"


@pytest.mark.parametrize(
    "ranks, gpus, modes, held, device, says",
    [
        (2, 0, [], 0, "cpu", "no GPU here"),
        (2, 1, ["Default"], 0, None, "2 ranks share 1 GPU(s): gloo"),
        (2, 1, ["Default"], 1, None, "share"),  # default mode: an earlier kernel only costs memory
        (2, 1, [EXCLUSIVE], 0, "cpu", "CUDA-capable device(s) is/are busy or unavailable"),
        (2, 1, [EXCLUSIVE], 1, "cpu", "a kernel of an earlier lesson? shut it down"),
        (2, 2, [EXCLUSIVE, EXCLUSIVE], 0, None, "one GPU per rank (2 of 2): nccl"),
        (2, 2, [EXCLUSIVE, EXCLUSIVE], 1, "cpu", "another process holds it"),
        (1, 1, ["E. Process"], 0, None, "one GPU per rank"),  # one process: exclusive is fine
        (4, 2, ["Default", "Default"], 0, None, "4 ranks share 2 GPU(s)"),
    ],
)
def test_the_route_follows_the_compute_mode(ranks, gpus, modes, held, device, says):
    route = ddp_jobs.route(ranks, gpus, modes, held)
    assert route.device == device and says in route.why
    assert route.environ == ({"COURSE_DEVICE": "cpu"} if device else {})


def test_the_route_refuses_impossible_counts():
    with pytest.raises(ValueError, match="ranks=0 must be >= 1"):
        ddp_jobs.route(0, 1)


SMI_GPUS = "0, GPU-aaaa, NVIDIA H100 80GB HBM3, Exclusive_Process\n"
QUERY_GPU = "nvidia-smi --query-gpu=index,uuid,name,compute_mode"
QUERY_APPS = "nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory"


def test_this_node_reads_nvidia_smi(fake_gpus, fake_commands, monkeypatch):
    monkeypatch.setattr(ddp_jobs.nvidia.shutil, "which", lambda name: "/usr/bin/" + name)
    fake_gpus(1)
    fake_commands({QUERY_GPU: SMI_GPUS, QUERY_APPS: ""})
    assert ddp_jobs.this_node(2).device == "cpu"
    assert ddp_jobs.this_node(1).device is None
    held = "GPU-aaaa, 4242, python, 1500\n"
    fake_commands({QUERY_GPU: SMI_GPUS, QUERY_APPS: held})
    assert "another process holds it" in ddp_jobs.this_node(1).why


def test_this_node_without_a_gpu_asks_nothing(fake_gpus, fake_commands):
    fake_gpus(0)
    calls = fake_commands({})
    assert ddp_jobs.this_node(2).device == "cpu" and calls.calls == []


def test_the_cpu_job_is_the_gpu_job_made_small_for_the_ci_cluster():
    assert (CPU_JOB.nodes, CPU_JOB.ranks_per_node, CPU_JOB.gpus_per_rank) == (2, 2, 0)
    assert (GPU_JOB.nodes, GPU_JOB.ranks_per_node, GPU_JOB.gpus_per_rank) == (2, 4, 1)
    # the CI cluster's nodes (.ci: 16 CPUs, 32000 MB each) hold it
    assert CPU_JOB.ranks_per_node * CPU_JOB.cpus_per_rank <= 16
    assert CPU_JOB.ranks_per_node * CPU_JOB.mem_gb_per_rank * 1024 <= 32000
