"""CIFAR-10 from a data folder, or a deterministic synthetic stand-in of the same shapes.

Compute nodes usually cannot reach the internet, so nothing here downloads on its own:
`course data fetch` downloads and verifies CIFAR-10 on a login node, into COURSE_DATA.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, Subset

CIFAR10_CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip
# Per-channel mean and std of the CIFAR-10 training images.
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


def data_root(root: str | os.PathLike | None = None) -> Path:
    """Where datasets live: `root`, else env COURSE_DATA, else ./data."""
    return Path(root or os.environ.get("COURSE_DATA") or "data").expanduser()


class SyntheticCIFAR10(Dataset):
    """Deterministic, learnable CIFAR-10 look-alike: 3x32x32 float images, 10 classes.

    Each class has a fixed smooth pattern; an image is its class pattern buried in noise, so the
    lesson CNN has to learn: with SGD (lr 0.05, momentum 0.9, batch 128) its loss falls within the
    first epoch of 5,000 images and test accuracy passes 90% by the third. The same
    (seed, train, size) always gives the same tensors, on any machine.
    """

    classes = CIFAR10_CLASSES

    def __init__(
        self, train: bool = True, size: int | None = None, seed: int = 0, noise: float = 4.0
    ):
        size = (5000 if train else 1000) if size is None else size
        if size < 1:
            raise ValueError(f"size={size} must be at least 1 image")
        patterns = self._class_patterns(seed)
        gen = torch.Generator().manual_seed(seed * 1000 + (1 if train else 2))
        self.targets = torch.randint(0, 10, (size,), generator=gen)
        noise_images = torch.randn(size, 3, 32, 32, generator=gen)
        # Scaled to about unit variance per pixel, like normalized CIFAR-10.
        self.data = (patterns[self.targets] + noise * noise_images) / (1 + noise**2) ** 0.5

    @staticmethod
    def _class_patterns(seed: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        coarse = torch.randn(10, 3, 4, 4, generator=gen)
        return torch.nn.functional.interpolate(
            coarse, size=32, mode="bilinear", align_corners=False
        )

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        return self.data[index], int(self.targets[index])


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

    from course_utils import cifar_standin

    cifar_standin.accept_standin()  # a stand-in from `course data synthetic` loads like CIFAR-10
    folder = data_root(root)
    cifar_standin.announced(folder)  # said below, once, with the split and size
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
        what = "synthetic CIFAR-10 stand-in" if cifar_standin.is_standin(folder) else "CIFAR-10"
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
    from course_utils import cifar_standin

    root = getattr(dataset, "root", None)
    return root is not None and cifar_standin.is_standin(root)


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
