"""The lab's data set on disk: many small image files and the same files as one archive.

Lesson 10 stages it onto node-local disk (`staging.stage`) and trains from the copy. Each image
is one small `.npy` file (3x32x32 bytes, as CIFAR-10 stores a picture), named with its index and
class: the layout of data sets that keep one file per sample, which is what makes shared file
systems slow. The pictures are the course's synthetic stand-in (`data.SyntheticCIFAR10`).
"""

from __future__ import annotations

import functools
import io
import os
import re
import shutil
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from course_utils.data import SyntheticCIFAR10
from course_utils.files import atomic_write
from course_utils.lab import staging
from course_utils.lab.staging import ARCHIVE, IMAGES  # the layout, named where staging reads it

DEFAULT_IMAGES = 512  # many small files, yet quick to unpack on a 2-core laptop
_NAME = re.compile(r"^(\d+)_(\d)\.npy$")


@dataclass(frozen=True)
class OnDisk:
    """The data set written by `write_dataset`."""

    folder: Path  # the small files
    archive: Path
    files: int
    nbytes: int


def image_files(images: int = DEFAULT_IMAGES, seed: int = 0) -> dict[str, bytes]:
    """{name: the .npy file's bytes} of the data set `write_dataset` writes, made in memory."""
    if images < 1:
        raise ValueError(f"images={images} must be at least 1")
    pictures = SyntheticCIFAR10(train=True, size=images, seed=seed)
    as_bytes = ((pictures.data * 0.25 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8)
    files = {}
    for i, (picture, label) in enumerate(zip(as_bytes.numpy(), pictures.targets.tolist())):
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, picture)  # the .npy format, in memory
        files[f"{i:05d}_{label}.npy"] = buffer.getvalue()
    return files


def content_digest(images: int = DEFAULT_IMAGES, seed: int = 0) -> str:
    """The digest (`staging.content_digest`) of a whole copy of the data set's images folder:
    what a staged copy must hold."""
    return staging.bytes_digest(image_files(images, seed))


def write_dataset(root: str | os.PathLike, images: int = DEFAULT_IMAGES, seed: int = 0) -> OnDisk:
    """Write `images` synthetic pictures under `root`: images/<index>_<class>.npy and images.tar.

    Written again only when the folder holds another count (a lesson run repeats quickly)."""
    if images < 1:
        raise ValueError(f"images={images} must be at least 1")
    root = Path(root)
    folder, archive = root / IMAGES, root / ARCHIVE
    existing = list(folder.glob("*.npy")) if folder.is_dir() else []
    if len(existing) != images or not archive.is_file():
        # one archive, written and synced once; the small files are unpacked from it (syncing
        # 512 files one by one takes seconds on a busy disk)
        files = {f"{IMAGES}/{name}": data for name, data in image_files(images, seed).items()}
        atomic_write(archive, functools.partial(_write_tar, files=files))
        partial = root / f".{IMAGES}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        staging.unpack(archive, partial)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(partial / IMAGES, folder)
        partial.rmdir()
    sizes = [p.stat().st_size for p in folder.glob("*.npy")]
    return OnDisk(folder, archive, len(sizes), sum(sizes))


def _write_tar(f, files: dict[str, bytes]) -> None:
    with tarfile.TarFile(fileobj=f, mode="w") as tar:
        folder = tarfile.TarInfo(IMAGES)
        folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, time.time()
        tar.addfile(folder)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, folder.mtime
            tar.addfile(info, io.BytesIO(data))


class FolderImages(Dataset):
    """The small files of `folder` (a staged copy or the shared one), read one per sample."""

    def __init__(self, folder: str | os.PathLike):
        self.files = sorted(Path(folder).glob("*.npy"))
        if not self.files:
            raise ValueError(
                f"no .npy images in {folder}: stage the archive first (staging.stage) or "
                "write the data set (lab_data.write_dataset)"
            )
        self.targets = [int(_NAME.match(p.name)[2]) for p in self.files]

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int):
        picture = torch.from_numpy(np.load(self.files[index]))
        return (picture.float() / 255 - 0.5) / 0.25, self.targets[index]
