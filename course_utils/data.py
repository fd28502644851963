"""CIFAR-10 from a data folder, or a deterministic synthetic stand-in of the same shapes, and
seeded DataLoaders and their throughput per worker count (lesson 02; the stand-in itself is
`course_utils.synthetic`).

Compute nodes usually cannot reach the internet, so nothing here downloads on its own:
`course data fetch` downloads and verifies CIFAR-10 on a login node, into COURSE_DATA.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, Subset

from course_utils import hpc, synthetic

# One of the course's published names (docs/conventions.md, "Layout"): `cifar10` falls back to the
# stand-in, and code outside the repository imports it from here. It is defined once, in synthetic.
from course_utils.synthetic import (
    CIFAR10_MEAN,
    CIFAR10_STD,
    SyntheticCIFAR10,  # noqa: E402, F401
)


def data_root(root: str | os.PathLike | None = None) -> Path:
    """Where datasets live: `root`, else env COURSE_DATA, else ./data."""
    return Path(root or os.environ.get("COURSE_DATA") or "data").expanduser()


def _default_transform():
    from torchvision import transforms

    return transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize(CIFAR10_MEAN, CIFAR10_STD)]
    )


def cifar10(
    root: str | os.PathLike | None = None,
    train: bool = True,
    transform=None,
    synthetic_size: int | None = None,
    quiet: bool = False,
) -> Dataset:
    """CIFAR-10 from `data_root(root)` if it is there, else SyntheticCIFAR10; says which.

    Never downloads: use `course data fetch` on a login node for the real data set.
    """
    from torchvision.datasets import CIFAR10

    synthetic.accept_standin()  # a stand-in from `course data synthetic` loads like CIFAR-10
    folder = data_root(root)
    synthetic.announced(folder)  # said below, once, with the split and size
    split = "train" if train else "test"
    try:
        dataset = CIFAR10(
            str(folder), train=train, download=False, transform=transform or _default_transform()
        )
    except RuntimeError:
        dataset = SyntheticCIFAR10(train=train, size=synthetic_size)
        if not quiet:
            print(
                f"data: synthetic CIFAR-10 stand-in ({len(dataset)} {split} images); "
                f"no CIFAR-10 in {folder} (run `course data fetch` on a login node)"
            )
        return dataset
    if not quiet:
        what = "synthetic CIFAR-10 stand-in" if synthetic.is_standin(folder) else "CIFAR-10"
        print(f"data: {what} from {folder} ({len(dataset)} {split} images)")
    return dataset


def is_synthetic(dataset: Dataset) -> bool:
    """Whether `dataset`, or the data set a `Subset` (random_split) was taken from, is the synthetic
    stand-in: in memory (`SyntheticCIFAR10`) or on disk (`course data synthetic`). Results on it
    show that code runs and learns, not how a model does on real images (lesson 02)."""
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    if isinstance(dataset, SyntheticCIFAR10):
        return True
    root = getattr(dataset, "root", None)
    return root is not None and synthetic.is_standin(root)


class FetchError(RuntimeError):
    """CIFAR-10 could not be downloaded; the message says what failed and what to do."""


def fetch_cifar10(root: str | os.PathLike | None = None) -> Path:
    """Download CIFAR-10 into the data folder and verify its checksum (torchvision's MD5).

    An archive copied into the folder beforehand (cifar-10-python.tar.gz) is verified and used
    without any download. Without a network, FetchError says so in one line.
    """
    from torchvision.datasets import CIFAR10

    folder = data_root(root)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for train in (True, False):
            CIFAR10(str(folder), train=train, download=True)
    except OSError as e:  # URLError, socket errors, a refused connection: all OSErrors
        reason = getattr(e, "reason", None) or e
        raise FetchError(
            f"could not download CIFAR-10 from {CIFAR10.url} ({reason}): run `course data fetch` "
            f"on a login node with internet, or copy {CIFAR10.filename} into {folder} and run it "
            "again (its checksum is verified)"
        ) from e
    return folder


def make_loader(
    dataset: Dataset,
    batch_size: int = 128,
    shuffle: bool = True,
    num_workers: int = 0,
    pin_memory: bool = False,
    seed: int = 0,
    sampler=None,
    drop_last: bool = False,
) -> DataLoader:
    """A DataLoader with a seeded shuffle, so a run's batch order is reproducible."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be at least 1")
    if num_workers < 0:
        raise ValueError(f"num_workers={num_workers} must be 0 (load in the main process) or more")
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle if sampler is None else False,
        sampler=sampler,
        num_workers=num_workers,
        pin_memory=pin_memory,
        generator=generator,
        drop_last=drop_last,
        persistent_workers=num_workers > 0,
    )


def loader_rates(dataset: Dataset, batch_size: int = 64, workers=None) -> dict[int, float]:
    """Images per second one pass of a DataLoader delivers, per `num_workers` (lesson 02, 02.3).

    `workers` defaults to 0 up to the allocated CPUs (`hpc.allocated_cpus()`): more workers than
    CPUs only compete for them. The loader alone is timed, as a GPU job sees it: the batches a
    GPU could consume per second.
    """
    rates = {}
    for count in workers if workers is not None else range(hpc.allocated_cpus() + 1):
        loader = make_loader(dataset, batch_size=batch_size, num_workers=count)
        start = time.perf_counter()
        images = sum(len(batch[0]) for batch in loader)
        rates[count] = images / (time.perf_counter() - start)
        del loader  # its workers end here
    return rates
