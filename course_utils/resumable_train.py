"""A training program that survives time limits, node failures and preemption, and resumes exactly.

    python -m course_utils.resumable_train --ckpt-dir runs/ckpt --epochs 2 --max-steps 40

Run it again with the same arguments after any interruption (kill -9, scancel, a requeue) and it
continues from the newest usable checkpoint in --ckpt-dir. On the CPU the final parameters are
bitwise identical to those of an uninterrupted run: the checkpoint holds the model, optimizer,
scheduler, RNG states and the sampler's position, and every epoch's order is a seeded permutation,
so a restart mid-epoch skips exactly the batches already used. SIGUSR1 or SIGTERM make it save,
requeue the job under Slurm (`scontrol requeue`) and exit. It ends by printing a hash of the
final parameters, which tests compare between runs.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler

from course_utils.checkpoint import (
    checkpoint_path,
    resume_or_start,
    rotate_checkpoints,
    save_checkpoint,
)
from course_utils.data import SyntheticCIFAR10
from course_utils.preemption import PreemptionFlag, requeue_job

EX_TEMPFAIL = 75  # "stopped early, run me again": preempted outside Slurm, nothing requeued it
# Settings that must not change between a run and its resume, or it is not the same run.
FIXED = ("seed", "batch_size", "dataset_size", "lr", "epochs")


class ResumableSampler(Sampler[int]):
    """A seeded permutation per epoch (like DistributedSampler) that can start mid-epoch.

    `set_epoch(e, start=k)` yields epoch e's order from its k-th sample on, so a resumed run
    sees exactly the samples an uninterrupted one would. With `world_size` > 1 each rank takes
    every world_size-th index of the same permutation (the tail that does not divide is dropped).
    """

    def __init__(self, length: int, seed: int = 0, rank: int = 0, world_size: int = 1):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
        self.length, self.seed, self.rank, self.world_size = length, seed, rank, world_size
        self.num_samples = length // world_size
        self.epoch, self.start = 0, 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        if not 0 <= start <= self.num_samples:
            raise ValueError(f"start={start} must be in [0, {self.num_samples}] samples")
        self.epoch, self.start = epoch, start

    def order(self) -> torch.Tensor:
        """This rank's indices for the current epoch, from the beginning."""
        gen = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        perm = torch.randperm(self.length, generator=gen)[: self.num_samples * self.world_size]
        return perm[self.rank :: self.world_size]

    def __iter__(self):
        return iter(self.order()[self.start :].tolist())

    def __len__(self) -> int:
        return self.num_samples - self.start


class TinyNet(nn.Sequential):
    """A small MLP with dropout, so the RNG state matters for an exact resume."""

    def __init__(self, hidden: int = 32, num_classes: int = 10):
        super().__init__(
            nn.Flatten(), nn.Linear(3 * 32 * 32, hidden), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(hidden, num_classes),
        )  # fmt: skip


@dataclass
class Config:
    ckpt_dir: str
    epochs: int = 2
    max_steps: int | None = None
    batch_size: int = 32
    dataset_size: int = 256
    lr: float = 0.05
    seed: int = 0
    save_every: int = 5
    keep_last: int = 3
    threads: int = 1
    step_delay: float = 0.0


def parameter_hash(model: nn.Module) -> str:
    """SHA-256 (first 16 hex digits) of all parameters and buffers, bit for bit."""
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def _check_same_run(saved: dict, config: Config) -> None:
    changed = {
        k: (saved[k], getattr(config, k))
        for k in FIXED
        if k in saved and saved[k] != getattr(config, k)
    }
    if changed:
        detail = ", ".join(f"{k}: checkpoint {a!r}, now {b!r}" for k, (a, b) in changed.items())
        raise ValueError(
            f"the checkpoints in {config.ckpt_dir} come from a run with other settings ({detail}); "
            "rerun with the same settings or use a fresh --ckpt-dir"
        )


def train(
    config: Config,
    *,
    stop_after: int | None = None,
    restore_rng: bool = True,
    restore_position: bool = True,
    log=print,
) -> str:
    """Train (resuming from config.ckpt_dir if possible); returns the final parameter hash.

    `stop_after` simulates a crash after that many steps of this call (nothing extra is saved).
    `restore_rng=False` and `restore_position=False` show what breaks an exact resume.
    """
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    model = TinyNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.8)
    dataset = SyntheticCIFAR10(train=True, size=config.dataset_size, seed=config.seed)
    sampler = ResumableSampler(len(dataset), seed=config.seed)
    # Its own generator: otherwise every `iter(loader)` draws a worker seed from the global RNG,
    # and a resume mid-epoch (one extra iter) would shift every later dropout mask.
    loader = DataLoader(
        dataset,
        batch_size=config.batch_size,
        sampler=sampler,
        generator=torch.Generator().manual_seed(config.seed),
    )
    max_steps = config.max_steps if config.max_steps is not None else float("inf")

    rng_before = torch.get_rng_state()
    ckpt = resume_or_start(
        config.ckpt_dir,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        map_location="cpu",
        log=log,
    )
    step, epoch, position = 0, 0, 0
    if ckpt is not None:
        _check_same_run(ckpt["config"], config)
        step, epoch, position = ckpt["step"], ckpt["sampler"]["epoch"], ckpt["sampler"]["start"]
        if not restore_rng:
            torch.set_rng_state(rng_before)
        if not restore_position:
            position = 0

    def save():
        path = checkpoint_path(config.ckpt_dir, step)
        save_checkpoint(
            path,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            epoch=epoch,
            step=step,
            sampler={"epoch": epoch, "start": position, "seed": config.seed},
            config=asdict(config),
        )
        rotate_checkpoints(config.ckpt_dir, config.keep_last)

    loss_fn, steps_here = nn.CrossEntropyLoss(), 0
    model.train()
    with PreemptionFlag() as flag:
        while epoch < config.epochs and step < max_steps:
            sampler.set_epoch(epoch, start=position)
            for inputs, targets in loader:
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(inputs), targets)
                loss.backward()
                optimizer.step()
                scheduler.step()
                step, steps_here, position = step + 1, steps_here + 1, position + len(targets)
                if position >= sampler.num_samples:
                    epoch, position = epoch + 1, 0
                log(f"step {step} epoch {epoch} loss {loss.item():.4f}")
                if stop_after is not None and steps_here >= stop_after:
                    log(f"simulated crash after {steps_here} steps")
                    return parameter_hash(model)
                if flag.should_stop():
                    save()
                    requeued = requeue_job()
                    log(
                        f"got {flag.name} at step {step}: checkpoint saved"
                        + ("; job requeued" if requeued else "; run again to resume")
                    )
                    raise SystemExit(0 if requeued else EX_TEMPFAIL)
                if step % config.save_every == 0:
                    save()
                if step >= max_steps:
                    break
                time.sleep(config.step_delay)  # only for demonstrations and tests of signals
    save()
    digest = parameter_hash(model)
    log(f"final parameter hash: {digest} (step {step}, epoch {epoch})")
    return digest


def parse_args(argv=None) -> Config:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Config(ckpt_dir="")
    p.add_argument("--ckpt-dir", required=True, help="folder for checkpoints (created if missing)")
    p.add_argument("--epochs", type=int, default=defaults.epochs)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in all")
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--dataset-size", type=int, default=defaults.dataset_size)
    p.add_argument("--lr", type=float, default=defaults.lr)
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument(
        "--save-every", type=int, default=defaults.save_every, help="steps between saves"
    )
    p.add_argument("--keep-last", type=int, default=defaults.keep_last, help="checkpoints kept")
    p.add_argument(
        "--threads",
        type=int,
        default=defaults.threads,
        help="torch threads; keep it equal between a run and its resume",
    )
    p.add_argument(
        "--step-delay", type=float, default=0.0, help="seconds to sleep per step (demos)"
    )
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "dataset_size", "save_every", "keep_last", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    return Config(**vars(args))


def main(argv=None) -> int:
    config = parse_args(argv)
    Path(config.ckpt_dir).mkdir(parents=True, exist_ok=True)
    train(config, log=lambda msg: print(msg, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
