"""Run a learner's `train_ddp` on every rank of a torchrun launch: exercise 05.1's check.

    torchrun --standalone --nproc-per-node=2 -m course_utils.jobs.ddp_exercise ANSWER.py OUT.pt

ANSWER.py defines `train_ddp(model, dataset, batch_size, lr, steps)`, which joins the process
group, trains and returns the model. Every rank prints its parameter checksum; rank 0 saves the
parameters to OUT.pt. The model and data are seeded as in jobs/single_process.py, so the result
can be compared with one process trained on the doubled batch.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import torch
import torch.distributed as dist

from course_utils import distributed, models
from course_utils.checkpoint import atomic_torch_save, unwrap_model
from course_utils.data import SyntheticCIFAR10

# What the check runs: per-rank batch, learning rate, steps (small: float noise stays < 1e-8).
BATCH_SIZE, LR, STEPS, IMAGES = 32, 0.01, 4, 1024


def load_answer(path: str):
    spec = importlib.util.spec_from_file_location("answer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.train_ddp


def main(argv=None) -> int:
    answer, out = sys.argv[1:] if argv is None else argv
    torch.manual_seed(0)
    model = models.Net()
    dataset = SyntheticCIFAR10(size=IMAGES)
    trained = unwrap_model(load_answer(answer)(model, dataset, BATCH_SIZE, LR, STEPS))
    rank = dist.get_rank() if distributed.is_initialized() else int(os.environ["RANK"])
    distributed.print_line(f"rank {rank}: parameter checksum {models.parameter_hash(trained)}")
    if rank == 0:
        atomic_torch_save(trained.state_dict(), out)
    if distributed.is_initialized():
        distributed.barrier()
        distributed.cleanup()
    return 0


if __name__ == "__main__":
    distributed.exit_now(main())
