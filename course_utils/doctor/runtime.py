"""`course doctor`'s rows on what this process computes with: CPU threads against the CPUs the
job allocated, the float32 precision flags, the distributed backends and the data (taught in
lesson 00; lessons 02, 04 and 05 go deeper)."""

from __future__ import annotations

import torch

from course_utils import hpc
from course_utils.doctor.findings import INFO, OK, WARN, Finding


def threads() -> list[Finding]:
    allocated, torch_threads = hpc.allocated_cpus(), torch.get_num_threads()
    value = f"allocated CPUs {allocated}, torch threads {torch_threads}"
    if torch_threads > allocated:
        return [
            Finding(
                "cpu threads",
                value,
                WARN,
                "more threads than CPUs: call course_utils.hpc.configure_threads() "
                "or set OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK",
            )
        ]
    if torch_threads < allocated:
        return [
            Finding(
                "cpu threads",
                value,
                INFO,
                "fewer threads than allocated CPUs: configure_threads() uses them all",
            )
        ]
    return [Finding("cpu threads", value, OK)]


def precision() -> list[Finding]:
    matmul = torch.backends.cuda.matmul.allow_tf32
    cudnn = torch.backends.cudnn.allow_tf32
    return [
        Finding(
            "tf32",
            f"matmul {matmul}, cudnn {cudnn}, float32 matmul precision "
            f"'{torch.get_float32_matmul_precision()}'",
        )
    ]


def distributed() -> list[Finding]:
    import torch.distributed as dist

    if not dist.is_available():
        return [Finding("distributed", "torch.distributed not built", WARN, "lesson 05 needs it")]
    names = {
        "gloo": dist.is_gloo_available(),
        "nccl": dist.is_nccl_available(),
        "mpi": dist.is_mpi_available(),
    }
    have = ", ".join(n for n, ok in names.items() if ok) or "none"
    status = OK if names["gloo"] or names["nccl"] else WARN
    return [Finding("distributed backends", have, status)]


def data() -> list[Finding]:
    from torchvision.datasets import CIFAR10

    from course_utils.data import data_root

    folder = data_root()
    try:
        CIFAR10(str(folder), train=False, download=False)
    except RuntimeError:
        return [
            Finding(
                "data",
                f"no CIFAR-10 in {folder}: lessons use the synthetic stand-in",
                INFO,
                "run `course data fetch` on a login node for the real images",
            )
        ]
    return [Finding("data", f"CIFAR-10 found in {folder}", OK)]
