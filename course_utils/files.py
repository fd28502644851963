"""Writing files so that a crash never leaves half of one: every writer of results uses it.

Checkpoints and programs' saved weights, benchmark and reference results, tensor files for the C++
programs, flight records, provoked failures' runs, the stand-in data set, the gradebook and
feedback, released and authored notebooks (tests/test_layout.py checks the helpers, programs and
benchmarks). Logs that grow line by line and a grading run's scratch files are not results.
Taught in lesson 06, where a checkpoint must survive a crash mid-save.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call `write(f)` on a temporary file in `path`'s folder, fsync it, then os.replace it.

    os.replace is atomic within one file system, so readers see the old file or the complete new
    one, never half of one. The temp file must be in the same folder (same file system).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # O_EXCL: never share a temp file; mode 0o666 minus the umask, like any new file.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)  # make the rename itself durable
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically: see `atomic_write`."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def write_text_if_changed(path: str | os.PathLike, text: str) -> bool:
    """Write `text` atomically unless `path` holds it already; True when it wrote. A source file
    rewritten with the same text gets a new time stamp, and make or ninja would rebuild it
    (lesson 07 writes C++ sources from a notebook)."""
    path = Path(path)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    atomic_write_text(path, text)
    return True


@contextmanager
def exclusive_lock(path: str | os.PathLike, timeout: float, holding: str) -> Iterator[Path]:
    """Hold an exclusive flock on the file `path` (made if missing) for the `with` block,
    waiting at most `timeout` seconds for another process to let go. flock is reliable on a
    node's local disk; on NFS or Lustre it may not be. `holding` ends the error: what the
    holder does, and what may have gone wrong."""
    path = Path(path)
    with open(path, "a") as handle:  # a lock file: flock's handle, no data
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"another process has held {path} for more than {timeout:g} s {holding}"
                    ) from None
                time.sleep(0.02)
        yield path  # closing the handle lets go of the lock


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open a directory
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
