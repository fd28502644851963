"""Run a learner's `train_ddp` on every rank of a job: the program of exercises 05.1 and 05.3.

    torchrun --standalone --nproc-per-node=2 -m course_utils.jobs.ddp_exercise \\
        --answer ANSWER.py --seed 1234 --save OUT.pt
    sbatch HEADER_AND_BODY.sh -m course_utils.jobs.ddp_exercise --answer ANSWER.py --seed 1234 ...

ANSWER.py defines `train_ddp(model, dataset, batch_size, lr, steps)`, which joins the process
group, trains and returns the model. The model and the data come from `--seed`
(`single_process.seeded`), which the check draws, so that the check can train one process on
the doubled batch at the same seed and compare. Every rank prints one line, `rank R/W on NODE:
parameter checksum H`; rank 0 saves the parameters to `--save`.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

import torch.distributed as dist

from course_utils import distributed, hpc, models, witness
from course_utils.checkpoint import atomic_torch_save, unwrap_model
from course_utils.environment import env_int
from course_utils.job_config import option, parse, shared
from course_utils.jobs.single_process import seeded
from course_utils.ranks import node_name

# What the checks run: per-rank batch, learning rate, steps (small: float noise stays < 1e-8).
BATCH_SIZE, LR, STEPS, IMAGES = 32, 0.01, 4, 1024


@dataclass(kw_only=True)
class Options:
    answer: str = option(help="the learner's train_ddp, as a module file")
    seed: int = shared("seed", 0)
    save: str | None = shared("save")


def load_answer(path: str):
    spec = importlib.util.spec_from_file_location("answer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.train_ddp


def main(argv=None) -> int:
    args = parse(Options, argv, __doc__)
    # OMP_NUM_THREADS as the launcher set it (a rank forked after torch was imported would keep
    # the pool it was forked with): the check's own run uses as many, so their last bits agree
    hpc.configure_threads(env_int("OMP_NUM_THREADS", default=None, minimum=1))
    model, dataset = seeded(args.seed, IMAGES)
    trained = unwrap_model(load_answer(args.answer)(model, dataset, BATCH_SIZE, LR, STEPS))
    joined = distributed.is_initialized()
    rank = dist.get_rank() if joined else int(os.environ.get("RANK", "0"))
    world = dist.get_world_size() if joined else int(os.environ.get("WORLD_SIZE", "1"))
    checksum = models.parameter_hash(trained)
    distributed.print_line(f"rank {rank}/{world} on {node_name()}: parameter checksum {checksum}")
    if rank == 0:  # in a Slurm job, sacct keeps the result (lesson 05 grades the learner's job)
        witness.to_job_record(f"seed {args.seed} sum {models.parameter_sum(trained):.8f}")
    if rank == 0 and args.save:
        atomic_torch_save(trained.state_dict(), args.save)
    if joined:
        distributed.barrier()
        distributed.cleanup()
    return 0


if __name__ == "__main__":
    distributed.exit_now(main())
