"""Lesson 05's jobs: what a multi-node DDP job asks for, and where the lesson's ranks run here.

Taught in lesson 05. Two facts, each defined once:
- `GPU_JOB` and `CPU_JOB`, the two jobs of exercise 05.3: the documentation's GPU cluster (2
  nodes of 4 GPUs, a GPU sold in a bundle of cores and memory), and the same job made small
  enough for the course's CI Slurm cluster and for a laptop's emulated nodes (2 nodes x 2 ranks
  on CPUs). The learner's header is written for both; the second is the one submitted.
- `route`: the device of the lesson's demonstration ranks on this node, a pure function of
  what the node answers (how many GPUs this process sees, their compute modes, whether other
  processes hold them). Under exclusive-process compute mode a GPU takes one process at a time:
  two ranks on cuda:0 fail with "CUDA-capable device(s) is/are busy or unavailable", so ranks
  that would share a GPU (or find it held by an earlier lesson's kernel) run on the CPU (gloo).
  `this_node` asks the hardware (`nvidia.gpus`, `nvidia.compute_processes`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils import answer_jobs, notebook_code, nvidia, paths
from course_utils.device import plan_device
from course_utils.files import atomic_write_text


@dataclass(frozen=True)
class DdpJob:
    """A data-parallel job of one task per rank (srun starts the ranks)."""

    nodes: int
    ranks_per_node: int
    gpus_per_rank: int  # 0: a CPU job
    cpus_per_rank: int  # on a GPU node, the cores sold with each GPU
    mem_gb_per_rank: int  # on a GPU node, the memory sold with each GPU
    minutes: int  # the time limit (no warning signal: slurm/ddp_srun.sh traps none)

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


# The documentation's GPU cluster: nodes of 4 GPUs, each GPU sold with 12 cores and 120 GB.
GPU_JOB = DdpJob(
    nodes=2,
    ranks_per_node=4,
    gpus_per_rank=1,
    cpus_per_rank=12,
    mem_gb_per_rank=120,
    minutes=120,
)
# The same job as the course's CI cluster (2 nodes on one 2-core machine) or a laptop runs it.
CPU_JOB = DdpJob(
    nodes=2,
    ranks_per_node=2,
    gpus_per_rank=0,
    cpus_per_rank=1,
    mem_gb_per_rank=2,
    minutes=10,
)


def job_script(header: str) -> str:
    """`header` and the commands of slurm/ddp_srun.sh after its own header: exercise 05.3's job,
    which runs `python -m course_utils.jobs.ddp_exercise` on every rank with the job's arguments."""
    lines = paths.course_file("slurm/ddp_srun.sh").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    body = "\n".join(["# the commands of slurm/ddp_srun.sh", *lines[start:], ""])
    return header.rstrip("\n") + "\n" + body


def answer_module(train_ddp, folder: str | os.PathLike) -> Path:
    """`train_ddp` (a function of a notebook cell) as a module the ranks load."""
    return notebook_code.function_module(train_ddp, "train_ddp", Path(folder))


def write_job(header: str, train_ddp, folder: str | os.PathLike, seed: int) -> str:
    """Exercise 05.3's job written into `folder` (the script and the learner's train_ddp as a
    module), for the learner to submit: the sbatch command line to run from where `folder` is
    given relative to (the job's ranks start there)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "05.3-job.sh"
    atomic_write_text(script, job_script(header))
    answer = answer_module(train_ddp, folder)
    program = ["-m", "course_utils.jobs.ddp_exercise", "--answer", answer, "--seed", seed]
    return answer_jobs.submit_line(script, program)  # it exports COURSE_DIR: config.sh is found


@dataclass(frozen=True)
class Route:
    device: str | None  # COURSE_DEVICE for the ranks ("cpu"), None: device.plan_device decides
    why: str

    @property
    def environ(self) -> dict[str, str]:
        """What to add to the ranks' environment."""
        return {"COURSE_DEVICE": self.device} if self.device else {}


def route(ranks: int, gpus: int, modes: Sequence[str] = (), held_by_others: int = 0) -> Route:
    """Where `ranks` ranks of one node run, given the `gpus` this process sees, the compute
    modes nvidia-smi reports for the node's GPUs, and how many GPUs other processes hold: the
    course's one device rule (`device.plan_device`), and a GPU another process holds under
    exclusive-process mode, which no rank can then use."""
    if ranks < 1 or gpus < 0 or held_by_others < 0:
        raise ValueError(f"ranks={ranks} must be >= 1, gpus={gpus} and held={held_by_others} >= 0")
    if gpus == 0:
        return Route("cpu", "no GPU here: the ranks run on the CPU (gloo)")
    exclusive = any(nvidia.is_exclusive(m) for m in modes)
    if exclusive and held_by_others:
        return Route(
            "cpu",
            "the GPU is in exclusive-process mode and another process holds it (a kernel of an "
            "earlier lesson? shut it down): the ranks run on the CPU (gloo)",
        )
    plan = plan_device(0, ranks, gpus=gpus, exclusive=exclusive)
    if plan.device.type == "cpu":
        return Route("cpu", plan.note)
    if plan.backend == "nccl":
        return Route(None, f"one GPU per rank ({ranks} of {gpus}): nccl")
    return Route(None, f"{ranks} ranks share {gpus} GPU(s): gloo (NCCL refuses a shared GPU)")


def this_node(ranks: int) -> Route:
    """`route` for this node, from what its GPUs and nvidia-smi answer."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not gpus:
        return route(ranks, 0)
    # the ranks' GPU is not known here without touching CUDA: exclusive if any GPU is
    mode = nvidia.mode_of(nvidia.gpus(), None)
    held = {p.gpu_uuid for p in nvidia.compute_processes() if p.pid != os.getpid()}
    return route(ranks, gpus, [mode] if mode else [], len(held))
