"""Train the lesson CNN with DistributedDataParallel: train_cifar.py plus the DDP diff.

    python -m course_utils.jobs.ddp_train                           # one process (rank 0 of 1)
    torchrun --standalone --nproc-per-node=2 -m course_utils.jobs.ddp_train --epochs 3
    srun python -m course_utils.jobs.ddp_train                      # one task per GPU (or CPU)

The diff from the single-device script: join a process group, give each rank its shard of the
data (DistributedSampler, set_epoch), wrap the model in DDP (gradients are averaged across ranks
during backward), and let only rank 0 print and save. Each rank prints a checksum of its final
parameters: DDP keeps the replicas identical, so all checksums must match.
Options avoid prefixes of torchrun's own (torchrun rejects an ambiguous `--n`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler

from course_utils import data, distributed, hpc, models, train
from course_utils.checkpoint import atomic_torch_save
from course_utils.device import local_device
from course_utils.job_config import option, parse, shared
from course_utils.ranks import node_name

MODELS = {"net": models.Net, "widenet": models.WideNet}


@dataclass(kw_only=True)
class Options:
    epochs: int = shared("epochs", 2)
    batch_size: int = shared("batch_size", 64)
    lr: float = shared("lr", 0.05)
    images: int = shared("images", 4096)
    arch: str = option("net", "the model (widenet has BatchNorm)", choices=sorted(MODELS))
    threads: int | None = shared("threads")
    disable_cuda: bool = shared("disable_cuda")
    backend: str | None = option(
        None,
        "unset: nccl when every rank on a node has a GPU of its own, else gloo",
        choices=["gloo", "nccl"],
    )
    max_steps: int | None = shared("max_steps")
    data_root: str | None = option(None, "CIFAR-10 folder (unset: synthetic images)")
    seed: int = shared("seed", 0)
    save: str | None = shared("save")
    timeout: float = option(60.0, "seconds to wait for all ranks")


def parse_args(argv=None) -> Options:
    return parse(Options, argv, __doc__)


def training_set(args):
    if args.data_root:
        return data.cifar10(args.data_root, train=True, quiet=not distributed.is_main_process())
    return data.SyntheticCIFAR10(train=True, size=args.images, seed=args.seed)


def global_stats(stats: train.Stats, device) -> tuple[float, float]:
    """Mean loss over all ranks' images, and images per second of the whole job."""
    t = torch.tensor([stats.loss * stats.images, stats.images], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    seconds = torch.tensor([stats.seconds], dtype=torch.float64, device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # the job is as slow as its slowest rank
    return float(t[0] / t[1]), float(t[1] / seconds[0])


def main(argv=None) -> int:
    args = parse_args(argv)
    env = distributed.DistEnv.from_environ()
    # torchrun's workers on a node share the CPUs Slurm gave its one task: split them.
    per_node = env.local_world_size if env.source == "torchrun" else 1
    threads = hpc.configure_threads(args.threads or max(1, hpc.allocated_cpus() // per_node))
    prefer = "cpu" if args.disable_cuda else None
    device = local_device(env.local_rank, env.local_world_size, prefer)
    distributed.init_process_group(args.backend, env, timeout=args.timeout, device=device)
    backend = dist.get_backend()
    distributed.print_line(
        f"rank {env.rank}/{env.world_size} (local {env.local_rank}) on {node_name()}: "
        f"joined, backend {backend}, device {device}, {threads} threads, from {env.source}"
    )
    distributed.barrier()

    dataset = training_set(args)
    # Each rank sees a disjoint 1/world_size of the data; the seed makes the shuffle agree.
    sampler = DistributedSampler(dataset, env.world_size, env.rank, shuffle=True, seed=args.seed)
    loader = data.make_loader(
        dataset, args.batch_size, sampler=sampler, pin_memory=device.type == "cuda"
    )
    torch.manual_seed(args.seed)  # identical initial weights; DDP also broadcasts rank 0's
    model = MODELS[args.arch]().to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    distributed.print0(
        f"training {args.arch}: {len(dataset)} images, {env.world_size} ranks x batch "
        f"{args.batch_size} = global batch {env.world_size * args.batch_size}, lr {args.lr}"
    )
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        stats = train.train_one_epoch(
            ddp,
            loader,
            optimizer,
            device=device,
            progress=False,
            max_steps=args.max_steps,
            non_blocking=device.type == "cuda",
        )
        loss, rate = global_stats(stats, device)
        distributed.print0(f"epoch {epoch}: loss {loss:.4f}  {rate:,.0f} images/s")
    distributed.print_line(f"rank {env.rank}: parameter checksum {models.parameter_hash(model)}")
    distributed.barrier()
    distributed.print0(
        f"throughput: {rate:,.0f} images/s with {env.world_size} processes "
        f"({rate / env.world_size:,.0f} per process, last epoch)"
    )
    if args.save and distributed.is_main_process():  # one writer: the replicas are identical
        atomic_torch_save(model.state_dict(), args.save)
        distributed.print_line(f"rank 0 saved the parameters to {args.save}")
    distributed.barrier()  # every rank done before any tears the group down
    distributed.cleanup()
    return 0


if __name__ == "__main__":
    distributed.exit_now(main())  # skips interpreter teardown, which could hang under torchrun
