"""A small data-parallel training loop that fails on purpose, one way at a time (lesson 09).

    torchrun --standalone --nproc-per-node=2 -m course_utils.jobs.faulty_ddp --fault hang
    sbatch slurm/ddp_srun.sh -m course_utils.jobs.faulty_ddp --fault hang --timeout 300

Every rank runs the same steps: load a batch of its own, forward, backward, average the
gradients with all_reduce (what DDP does inside backward; written out here so a stack shows it),
then an SGD step. A healthy run ends with every rank printing the same parameter sum, which
depends on --seed and on how many ranks trained together. Only --faulty-rank misbehaves, in
step --fault-step:
    none         nobody: the job trains and ends
    never-joins  stalls before init_process_group: the others time out joining
    hang         stalls in load_next_batch: the others time out in all_reduce
    mismatch     calls broadcast where the others call all_reduce
    oom          asks for a batch that cannot fit: the allocator's real out-of-memory error
--timeout bounds the join and every collective; --stall is how long a stalled rank sleeps.
Rank 0 writes the run's truth (fault, faulty rank, cause) to --truth before anything can fail.
With TORCH_FR_BUFFER_SIZE and TORCH_FR_DUMP_TEMP_FILE set, each rank dumps its flight record
when it fails or is told to stop (SIGTERM). Options avoid prefixes of torchrun's own.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from course_utils import distributed, witness
from course_utils.failing import failures, flight_recorder
from course_utils.files import atomic_write_text
from course_utils.job_config import option, parse, parser, shared
from course_utils.models import parameter_sum

FAULTS = tuple(failures.CAUSES)


@dataclass(kw_only=True)
class Options:
    fault: str = option("none", "what the faulty rank does", choices=("none", *FAULTS))
    faulty_rank: int = option(1, "the rank that misbehaves", minimum=0)
    fault_step: int = option(2, "the step it misbehaves in", minimum=1)
    steps: int = shared("steps", 3)
    seed: int = shared("seed", 0)
    timeout: float = option(30.0, "seconds for joining and collectives")
    stall: float = option(600.0, "seconds a stalled rank sleeps")
    master_port: int | None = option(None, "rank 0 listens here (alone)")
    truth: str | None = option(None, "rank 0 writes the run's truth (JSON) here")


def parse_args(argv=None) -> Options:
    args = parse(Options, argv, __doc__)
    if args.fault != "none" and args.fault_step > args.steps:
        parser(Options, __doc__).error(
            f"--fault-step {args.fault_step} must be one of the --steps (1..{args.steps})"
        )
    return args


def write_truth(path: str, args, world_size: int) -> None:
    truth = {"fault": args.fault, "rank": args.faulty_rank, "world_size": world_size}
    truth["cause"] = failures.CAUSES.get(args.fault)
    atomic_write_text(path, json.dumps(truth) + "\n")


def stall(seconds: float) -> None:
    """Stand-in for a rank stuck on something slow: a data file, a lock, a dead mount."""
    time.sleep(seconds)


def load_next_batch(
    step: int, rows: int = 32, stalled: float = 0.0, seed: int = 0, rank: int = 0
) -> torch.Tensor:
    if stalled:
        stall(stalled)
    batch = torch.empty(rows, 16)  # an impossible `rows` fails here, as a real batch would
    return batch.normal_(
        generator=torch.Generator().manual_seed(failures.batch_seed(seed, step, rank))
    )


def average_gradients(model: nn.Module, mismatch: bool = False) -> None:
    """Sum the gradients over ranks and divide: DDP's all_reduce, written out."""
    for p in model.parameters():
        if mismatch:  # the bug: a different collective on one rank
            dist.broadcast(p.grad, src=0)
        else:
            dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


def train(args, rank: int, faulty: bool) -> nn.Module:
    torch.manual_seed(args.seed)
    model = nn.Linear(16, 1)
    for step in range(1, args.steps + 1):
        now = faulty and step == args.fault_step
        stalled = args.stall if now and args.fault == "hang" else 0.0
        rows = failures.IMPOSSIBLE_ROWS if now and args.fault == "oom" else 32
        x = load_next_batch(step, rows, stalled, args.seed, rank)
        model.zero_grad()
        model(x).pow(2).mean().backward()
        average_gradients(model, mismatch=now and args.fault == "mismatch")
        with torch.no_grad():
            for p in model.parameters():
                p -= failures.LEARNING_RATE * p.grad
        distributed.print_line(f"rank {rank}: step {step} done")
    return model


def leave_record_on_sigterm(rank: int) -> None:
    """The launcher stops the survivors of a failure (SIGTERM): leave the flight record first."""

    def handler(signum, frame):
        flight_recorder.dump_flight_record(rank)
        distributed.exit_now(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.master_port is not None:
        os.environ["MASTER_PORT"] = str(args.master_port)
    env = distributed.DistEnv.from_environ()
    faulty = args.fault != "none" and env.rank == args.faulty_rank
    if args.truth and env.rank == 0:
        write_truth(args.truth, args, env.world_size)
    distributed.print_line(f"rank {env.rank}/{env.world_size}: started, pid {os.getpid()}")
    if faulty and args.fault == "never-joins":
        stall(args.stall)
    distributed.init_process_group("gloo", env, timeout=args.timeout, device=torch.device("cpu"))
    leave_record_on_sigterm(env.rank)
    try:
        model = train(args, env.rank, faulty)
    except Exception:
        flight_recorder.dump_flight_record(env.rank)
        raise
    total = parameter_sum(model)
    distributed.print_line(
        f"rank {env.rank}: finished, seed {args.seed}, parameter sum {total:.6f}"
    )
    if distributed.is_main_process():  # in a Slurm job, sacct keeps the result (lesson 09)
        witness.to_job_record(f"seed {args.seed} sum {total:.6f}")
    distributed.barrier()
    distributed.cleanup()
    return 0


if __name__ == "__main__":
    distributed.exit_now(main())
