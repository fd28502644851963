"""The synthetic CIFAR-10 stand-in: in memory (`SyntheticCIFAR10`) and on disk, in torchvision's
own format (cifar-10-batches-py). Taught in lesson 02.

`SyntheticCIFAR10` is a deterministic, learnable data set of CIFAR-10's shapes, classes and
statistics (the constants below): `data.cifar10` falls back to it when no CIFAR-10 is there.

Compute nodes have no internet and learners' scripts read CIFAR-10 the documentation's way:
`torchvision.datasets.CIFAR10(root="./data", download=False)`. `write_standin` (`course data
synthetic`) writes the stand-in as the same pickled batches, so such a script runs unchanged, and
says everywhere that it is synthetic.

One thing cannot be faked: torchvision checks each file's MD5 against the real archive's. The
stand-in therefore carries a manifest with its own checksums (COURSE-SYNTHETIC.json), and
`accept_standin()` lets torchvision accept exactly those files, still verified (a damaged
stand-in is still refused; the real CIFAR-10 is checked as before). Programs started by the
course's Slurm scripts and by `python -m course_utils.jobs.your_program` get it automatically;
it prints one line when it lets a stand-in through.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import pickle
import sys
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from course_utils.files import atomic_write, atomic_write_text

CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
# Per-channel mean and std of the CIFAR-10 training images (what the lessons' Normalize undoes).
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)

FOLDER = "cifar-10-batches-py"  # torchvision's CIFAR10.base_folder
MANIFEST = "COURSE-SYNTHETIC.json"
CIFAR_MODULE = "torchvision.datasets.cifar"
TRAIN_FILES = [f"data_batch_{i}" for i in range(1, 6)]


# ---------------------------------------------------------------------------- in memory


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


# ---------------------------------------------------------------------------- on disk


def _as_bytes(images) -> np.ndarray:
    """Normalized float images (N, 3, 32, 32) -> CIFAR's uint8 rows (N, 3072), channel-major."""
    mean, std = np.array(CIFAR10_MEAN), np.array(CIFAR10_STD)
    pixels = images.numpy() * std[None, :, None, None] + mean[None, :, None, None]
    return np.clip(np.rint(pixels * 255), 0, 255).astype(np.uint8).reshape(len(images), -1)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()


def _write_batch(path: Path, label: str, images, targets) -> None:
    batch = {
        "batch_label": label,
        "labels": [int(t) for t in targets],
        "data": _as_bytes(images),
        "filenames": [f"synthetic_{i:05d}.png" for i in range(len(targets))],
    }
    atomic_write(path, lambda f: pickle.dump(batch, f, protocol=4))


def write_standin(
    root: str | os.PathLike, train_size: int = 50_000, test_size: int = 10_000, seed: int = 0
) -> Path:
    """Write the synthetic stand-in under `root`/cifar-10-batches-py; returns that folder.

    Same files and layout as CIFAR-10 (5 training batches, a test batch, batches.meta), filled
    with `SyntheticCIFAR10(seed=seed)` images quantized to bytes as real images are.
    """
    if train_size < len(TRAIN_FILES):
        raise ValueError(
            f"train_size={train_size} must be at least {len(TRAIN_FILES)}: CIFAR-10's format "
            f"spreads the training images over {len(TRAIN_FILES)} batch files"
        )
    if test_size < 1:
        raise ValueError(f"test_size={test_size} must be at least 1 image; pass a positive size")
    folder = Path(root).expanduser() / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "data_batch_1").exists() and not (folder / MANIFEST).exists():
        raise ValueError(
            f"{folder} holds CIFAR-10 already (no {MANIFEST}): the stand-in would overwrite "
            "real data; choose another --root"
        )
    train = SyntheticCIFAR10(train=True, size=train_size, seed=seed)
    parts = np.array_split(np.arange(train_size), len(TRAIN_FILES))
    for i, (name, part) in enumerate(zip(TRAIN_FILES, parts), start=1):
        label = f"synthetic training batch {i} of 5 (not CIFAR-10)"
        _write_batch(folder / name, label, train.data[part], train.targets[part])
    test = SyntheticCIFAR10(train=False, size=test_size, seed=seed)
    _write_batch(
        folder / "test_batch", "synthetic test batch (not CIFAR-10)", test.data, test.targets
    )
    meta = {
        "label_names": list(CIFAR10_CLASSES),
        "num_cases_per_batch": len(parts[0]),
        "num_vis": 3072,
    }
    atomic_write(folder / "batches.meta", lambda f: pickle.dump(meta, f, protocol=4))
    files = [*TRAIN_FILES, "test_batch", "batches.meta"]
    manifest = {
        "synthetic": True,
        "what": "the course's synthetic CIFAR-10 stand-in (course data synthetic), not CIFAR-10",
        "train_size": train_size,
        "test_size": test_size,
        "seed": seed,
        "md5": {name: _md5(folder / name) for name in files},
    }
    atomic_write_text(folder / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return folder


def standin_checksum(path: str | os.PathLike) -> str | None:
    """The MD5 a stand-in file should have (from its folder's manifest), or None: not one."""
    path = Path(path)
    manifest = path.parent / MANIFEST
    if path.parent.name != FOLDER or not manifest.is_file():
        return None
    try:
        return json.loads(manifest.read_text())["md5"].get(path.name)
    except (ValueError, KeyError, TypeError):
        return None


def is_standin(root: str | os.PathLike) -> bool:
    """Whether `root` holds the course's stand-in (not the real CIFAR-10)."""
    return (Path(root) / FOLDER / MANIFEST).is_file()


_SAID: set[str] = set()  # stand-in folders already announced in this process


def announced(root: str | os.PathLike) -> None:
    """Do not announce the stand-in under `root` again (its caller said it already)."""
    _SAID.add(str(Path(root) / FOLDER))


def accept_standin() -> None:
    """Let torchvision's CIFAR10 load the stand-in: its files pass when they match the stand-in's
    own manifest; every other file is checked as before. Idempotent."""
    cifar = importlib.import_module(CIFAR_MODULE)
    if getattr(cifar.check_integrity, "_course_standin", False):
        return
    original = cifar.check_integrity

    def check_integrity(fpath, md5=None) -> bool:
        expected = standin_checksum(fpath)
        if expected is None:
            return original(fpath, md5)
        ok = Path(fpath).is_file() and _md5(Path(fpath)) == expected
        folder = str(Path(fpath).parent)
        if ok and folder not in _SAID:
            _SAID.add(folder)
            print(
                f"data: {folder} is the course's synthetic CIFAR-10 stand-in, not CIFAR-10 "
                "(checked against its own checksums)",
                file=sys.stderr,
                flush=True,
            )
        return ok

    check_integrity._course_standin = True
    cifar.check_integrity = check_integrity


class _AcceptWhenImported(importlib.abc.MetaPathFinder):
    """An import hook: once torchvision.datasets.cifar has been imported, accept the stand-in.
    Cheaper than importing torchvision up front in programs that never touch it."""

    def find_spec(self, name, path=None, target=None):
        if name != CIFAR_MODULE:
            return None
        sys.meta_path.remove(self)  # one use
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenAccept(spec.loader)
        return spec


class _ThenAccept(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        accept_standin()


def accept_standin_on_import() -> None:
    """`accept_standin` as soon as (and only if) the program imports torchvision's CIFAR10."""
    if CIFAR_MODULE in sys.modules:
        accept_standin()
    elif not any(isinstance(f, _AcceptWhenImported) for f in sys.meta_path):
        sys.meta_path.insert(0, _AcceptWhenImported())
