"""The lesson CNN as a LightningModule (lesson 05), and Lightning's checkpoints (lesson 06).

Lightning's way: ModelCheckpoint saves, `fit(ckpt_path="last")` resumes.

Lightning writes a complete checkpoint itself (model, optimizers, schedulers, loops' progress,
callbacks' states) and, under Slurm, its SLURMEnvironment(auto_requeue=True) saves and requeues
on the signal set with `#SBATCH --signal=USR1@...`. Needs `lightning` (in requirements.txt).
"""

from __future__ import annotations

import inspect
import logging
import tempfile
import warnings
from pathlib import Path

import torch
from torch.nn import functional as F

from course_utils import data, models


def lightning_module(lr: float):
    import lightning as L

    class LitNet(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = models.Net()

        def training_step(self, batch, batch_idx):
            inputs, targets = batch
            loss = F.cross_entropy(self.net(inputs), targets)
            self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=lr, momentum=0.9)

    return LitNet()


def fit_with_checkpoints(folder, max_steps: int, every_n_steps: int = 5, resume: bool = False):
    """Train the lesson CNN for `max_steps` on one CPU with ModelCheckpoint; returns the trainer.

    `resume=True` continues from `folder`/last.ckpt, as a restarted job would.
    """
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    warnings.filterwarnings("ignore", module="lightning")  # tips about workers and loggers
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    L.seed_everything(0, verbose=False)
    loader = data.make_loader(data.SyntheticCIFAR10(size=256), batch_size=32)

    class CountSteps(L.Callback):  # the steps this fit ran, wherever it started from
        ran = 0

        def on_train_batch_end(self, *args):
            CountSteps.ran += 1

    checkpoints = ModelCheckpoint(
        dirpath=folder,
        every_n_train_steps=every_n_steps,
        save_last=True,
        save_top_k=-1,
        filename="{step}",
    )
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=max_steps,
        default_root_dir=folder,  # Lightning writes nothing beside the notebook (lightning_logs/)
        logger=False,
        callbacks=[checkpoints, CountSteps()],
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    last = Path(folder) / "last.ckpt"
    with torch.random.fork_rng():  # leave the notebook's random stream alone
        trainer.fit(lightning_module(0.05), loader, ckpt_path=str(last) if resume else None)
    trainer.course_steps_ran = CountSteps.ran
    return trainer


def atomic_save_route() -> dict[str, object]:
    """How the installed Lightning saves a checkpoint, read from its source (lesson 06):
    `_atomic_save` writes through fsspec, whose local files in a transaction are temporary
    files from `tempfile.mkstemp()` (the system temp folder), moved on commit."""
    try:
        import lightning
        from fsspec.implementations.local import LocalFileOpener
        from lightning.fabric.utilities import cloud_io
    except ImportError as e:
        return {"lightning": f"not installed here ({e}); pip install -r requirements.txt"}

    save = inspect.getsource(cloud_io._atomic_save)
    opener = inspect.getsource(LocalFileOpener)
    return {
        "lightning": lightning.__version__,
        "_atomic_save writes through fsspec in a transaction": "fs.transaction" in save,
        "fsspec's temporary file from tempfile.mkstemp()": "tempfile.mkstemp()" in opener,
        "system temp folder": tempfile.gettempdir(),
        "moved onto the target with shutil.move": "shutil.move(self.temp" in opener,
        "os.fsync anywhere on the way": "fsync" in save + opener,
    }
