"""The same training with PyTorch Lightning: a LightningModule and a Trainer with DDP.

    python -m course_utils.jobs.lightning_train --devices 2        # 2 CPU processes (gloo) here
    srun python -m course_utils.jobs.lightning_train --devices 4 --num-nodes 2 --accelerator gpu

Under srun, Lightning reads the ranks from Slurm (one task per device, as the cluster
documentation shows); alone, its DDP strategy starts the other processes itself.
"""

from __future__ import annotations

import logging
import sys
import warnings
from dataclasses import dataclass

import torch

from course_utils import data, models
from course_utils.distributed import print_line
from course_utils.job_config import option, parse, shared
from course_utils.lightning_helpers import lightning_module


@dataclass(kw_only=True)
class Options:
    epochs: int = shared("epochs", 2)
    batch_size: int = shared("batch_size", 64)
    lr: float = shared("lr", 0.05)
    images: int = shared("images", 2048)
    devices: int = option(2, "processes (GPUs) per node", minimum=1)
    num_nodes: int = option(1, "nodes", minimum=1)
    accelerator: str = option("cpu", "Lightning's accelerator: cpu or gpu")


def parse_args(argv=None) -> Options:
    return parse(Options, argv, __doc__)


def main(argv=None) -> int:
    args = parse_args(argv)
    import lightning as L

    # Lightning's tips (about workers, loggers, the tensor cores) say nothing about DDP here.
    warnings.filterwarnings("ignore", module="lightning")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    L.seed_everything(0, verbose=False)
    model = lightning_module(args.lr)
    dataset = data.SyntheticCIFAR10(train=True, size=args.images)
    # Lightning adds the DistributedSampler (and calls set_epoch) itself.
    loader = data.make_loader(dataset, args.batch_size)

    class PrintLoss(L.Callback):
        def on_train_epoch_end(self, trainer, module):
            if trainer.is_global_zero:
                loss = trainer.callback_metrics["train_loss"]
                print_line(f"epoch {trainer.current_epoch + 1}: loss {loss:.4f}")

    trainer = L.Trainer(
        accelerator=args.accelerator,
        devices=args.devices,
        num_nodes=args.num_nodes,
        strategy="ddp",
        max_epochs=args.epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[PrintLoss()],
    )
    trainer.fit(model, loader)
    checksum = models.parameter_hash(model.net)
    # one write per line: the two ranks share stdout (print's text and newline could interleave)
    print_line(f"rank {trainer.global_rank}/{trainer.world_size}: parameter checksum {checksum}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
