"""Complete, atomic, safe checkpoints: save, load, find the latest, rotate, resume or start.
Taught in lesson 06.

A checkpoint is one dict with named keys (model, optimizer, scheduler, scaler, epoch, step,
sampler, rng, config), written to a temporary file in the same folder, flushed, fsynced and then
renamed over the target, so a crash mid-save never leaves a broken file under the final name.
Loading uses `torch.load(weights_only=True)`, which refuses to run code from the file, and turns
every failure into a `CheckpointError` that names the file and what is wrong.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import warnings
import zipfile
from pathlib import Path

import numpy as np
import torch

from course_utils import distributed
from course_utils.device import local_device
from course_utils.files import atomic_write

FORMAT = "course-checkpoint/1"
REQUIRED_KEYS = ("format", "model", "epoch", "step")
NAME = re.compile(r"^ckpt-(\d+)\.pt$")
ZIP_MAGIC, PICKLE_PROTO = b"PK\x03\x04", b"\x80"  # how torch.save files start
PREFIXES = ("module.", "_orig_mod.")  # added by DistributedDataParallel and torch.compile
PLAIN_TYPES = (type(None), bool, int, float, str)  # exact types: subclasses pickle as globals
TENSOR_TYPES = (torch.Tensor, torch.dtype, torch.Size)


class CheckpointError(Exception):
    """A checkpoint file cannot be used; the message names the file and what is wrong."""


# ----------------------------------------------------------------------------- names and files


def checkpoint_path(folder: str | os.PathLike, step: int) -> Path:
    """The file name for the checkpoint taken after `step` steps: DIR/ckpt-00000042.pt."""
    return Path(folder) / f"ckpt-{step:08d}.pt"


def list_checkpoints(folder: str | os.PathLike) -> list[Path]:
    """Checkpoints in `folder`, oldest first, ordered by the step in their name (not by mtime,
    which shared file systems and copies do not keep reliably). Temporary files are ignored."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(int(m[1]), p) for p in folder.iterdir() if (m := NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(folder: str | os.PathLike) -> Path | None:
    """The newest checkpoint in `folder`, or None when there is none."""
    found = list_checkpoints(folder)
    return found[-1] if found else None


def rotate_checkpoints(folder: str | os.PathLike, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` checkpoints; returns the deleted paths."""
    if keep_last < 1:
        raise ValueError(
            f"keep_last={keep_last} must be at least 1, or the resume has nothing left"
        )
    old = list_checkpoints(folder)[:-keep_last]
    for path in old:
        path.unlink(missing_ok=True)
    return old


def atomic_torch_save(obj, path: str | os.PathLike) -> Path:
    """torch.save to a temporary file in the same folder, fsync, then os.replace onto `path`."""
    return atomic_write(path, lambda f: torch.save(obj, f))


# ----------------------------------------------------------------------------- state pieces


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The plain module inside DistributedDataParallel / DataParallel and torch.compile wrappers."""
    while True:
        if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
            model = model.module
        elif hasattr(model, "_orig_mod"):  # torch.compile's OptimizedModule
            model = model._orig_mod
        else:
            return model


def strip_prefixes(state_dict: dict) -> dict:
    """Remove leading `module.` and `_orig_mod.` from keys saved from wrapped models."""

    def clean(key: str) -> str:
        changed = True
        while changed:
            changed = False
            for prefix in PREFIXES:
                if key.startswith(prefix):
                    key, changed = key[len(prefix) :], True
        return key

    return {clean(k): v for k, v in state_dict.items()}


def rng_state() -> dict:
    """The random number generators' states (Python, NumPy, torch CPU and every CUDA device),
    in types that `torch.load(weights_only=True)` accepts."""
    np_state = np.random.get_state(legacy=False)
    state = {
        "python": random.getstate(),
        "numpy": {
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what `rng_state` captured (CUDA states only where this process has CUDA)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": "MT19937",
            # .cpu(): a checkpoint mapped to a GPU brings this key there too.
            "state": {"key": n["key"].cpu().numpy().astype(np.uint32), "pos": n["pos"]},
            "has_gauss": n["has_gauss"],
            "gauss": n["gauss"],
        }
    )
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _check_plain(value, where: str) -> None:
    """Refuse values that weights_only=True could not load back (better now than at resume)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _check_plain(k, where)
            _check_plain(v, f"{where}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_plain(v, f"{where}[{i}]")
    elif type(value) not in PLAIN_TYPES and not isinstance(value, TENSOR_TYPES):
        raise ValueError(
            f"{where} is a {type(value).__name__}; a checkpoint holds only tensors, numbers, "
            "strings, None and lists/dicts of them (weights_only=True loads nothing else); "
            "convert it first, e.g. str(path) or vars(args)"
        )


# ----------------------------------------------------------------------------- save and load


def save_checkpoint(
    path,
    *,
    model,
    optimizer=None,
    scheduler=None,
    scaler=None,
    epoch=0,
    step=0,
    **extra,
):
    """Save everything a resume needs to `path`, atomically. Returns the path (None on ranks > 0).

    `extra` adds named entries, e.g. `sampler={"epoch": 3, "start": 640}` (default: the epoch)
    and `config=vars(args)` (plain values only). Under torch.distributed only rank 0 writes;
    every rank then waits at a barrier so that no rank goes on (or exits) before the file exists.
    """
    state = {
        "format": FORMAT,
        "model": unwrap_model(model).state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "epoch": int(epoch),
        "step": int(step),
        "sampler": extra.pop("sampler", {"epoch": int(epoch)}),  # for DistributedSampler.set_epoch
        "rng": rng_state(),
        "config": extra.pop("config", {}),
        "torch_version": str(torch.__version__),  # a plain str: TorchVersion is a class
        **extra,
    }
    for key in ("sampler", "config", *extra):
        _check_plain(state[key], key)
    written = None
    if distributed.is_main_process():
        written = atomic_torch_save(state, path)
    distributed.barrier()
    return written


def default_map_location() -> torch.device:
    """Where a checkpoint's tensors go by default: this rank's device (`device.local_device`).

    In a process group that is the device it joined with, so rank 1 of a node loads onto
    cuda:1 even when rank 0 saved from cuda:0; a checkpoint saved on a GPU loads on a CPU node.
    """
    current = distributed.state()
    if current is not None:
        return current.device
    env = distributed.DistEnv.from_environ()
    return local_device(env.local_rank, env.local_world_size)


def _read(path: Path, map_location) -> dict:
    """torch.load with weights_only=True; every failure becomes a CheckpointError."""
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    _check_header(path)
    try:
        with warnings.catch_warnings():  # a plain pickle file warns before it is refused
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            obj = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(
            f"{path}: refused by weights_only=True, the file holds objects that would run code "
            f"when loaded (untrusted or not a plain checkpoint; do not retry with "
            f"weights_only=False unless you trust its source): {_unpickler_reason(str(e))}"
        ) from None
    except Exception as e:
        raise CheckpointError(f"{path}: {_diagnose(path, e)}") from None
    if not isinstance(obj, dict):
        raise CheckpointError(
            f"{path}: wrong structure: a checkpoint is a dict, this file holds a "
            f"{type(obj).__name__}"
        )
    missing = [k for k in REQUIRED_KEYS if k not in obj]
    if missing:
        raise CheckpointError(
            f"{path}: wrong structure: missing keys {missing} (has {sorted(map(str, obj))}); "
            "was it written by save_checkpoint?"
        )
    return obj


def _check_header(path: Path) -> None:
    """A torch.save file is a zip archive (or, from old versions, a pickle): look before loading."""
    with open(path, "rb") as f:
        head = f.read(4)
    if not head:
        raise CheckpointError(
            f"{path}: empty file (0 bytes): the save was interrupted or the disk was full"
        )
    if head != ZIP_MAGIC and head[:1] != PICKLE_PROTO:
        raise CheckpointError(
            f"{path}: not a PyTorch checkpoint: it does not start like a torch.save file "
            f"(first bytes {head!r}); random bytes, another format or a partial copy"
        )


def _unpickler_reason(message: str) -> str:
    """The line of torch's long weights_only message that says what was refused."""
    for line in message.splitlines():
        if "WeightsUnpickler error:" in line:
            reason = line.split("WeightsUnpickler error:", 1)[1]
            return reason.split(" was not an allowed")[0].strip()
        if "GLOBAL" in line:  # e.g. "Trying to load unsupported GLOBAL posix.mkdir whose ..."
            return line.strip()
    return message.strip().splitlines()[0] if message.strip() else "unpickling failed"


def _diagnose(path: Path, error: Exception) -> str:
    """Why torch.load failed, in words: a damaged or incomplete archive, or the original error."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
            names = z.namelist()
        if bad:
            return f"corrupt: member {bad} of the zip archive is damaged; use the previous one"
        if not any(n.endswith("data.pkl") for n in names):
            return (
                "incomplete: the save stopped before the object was written; use the previous one"
            )
    elif _starts_with(path, ZIP_MAGIC):
        return "truncated or corrupt: the zip archive is incomplete; use the previous one"
    first = str(error).strip().split(". ")[0]
    return f"cannot be read ({type(error).__name__}: {first})"


def _starts_with(path: Path, magic: bytes) -> bool:
    with open(path, "rb") as f:
        return f.read(len(magic)) == magic


def _load_model(path: Path, model, state_dict: dict) -> None:
    target = unwrap_model(model)
    want = target.state_dict()
    got = strip_prefixes(state_dict)
    missing = sorted(set(want) - set(got))
    unexpected = sorted(set(got) - set(want))
    mismatched = [
        f"{k}: file {tuple(got[k].shape)} vs model {tuple(want[k].shape)}"
        for k in want
        if k in got and hasattr(got[k], "shape") and got[k].shape != want[k].shape
    ]
    problems = []
    if missing:
        problems.append(f"missing keys {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    if unexpected:
        problems.append(f"unexpected keys {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}")
    if mismatched:
        problems.append("shape mismatch " + "; ".join(mismatched[:5]))
    if problems:
        raise CheckpointError(
            f"{path}: does not fit this model: {', '.join(problems)}; "
            "was it saved from a different architecture?"
        )
    target.load_state_dict(got)


def _load_part(path: Path, name: str, obj, state) -> None:
    if obj is None:
        return
    if state is None:
        raise CheckpointError(f"{path}: has no {name} state, but a {name} was passed to load")
    try:
        obj.load_state_dict(state)
    except (KeyError, ValueError, RuntimeError, TypeError) as e:
        raise CheckpointError(f"{path}: {name} state does not fit: {e}") from None


def load_checkpoint(
    path,
    *,
    model=None,
    optimizer=None,
    scheduler=None,
    scaler=None,
    map_location=None,
) -> dict:
    """Read a checkpoint safely and load the objects passed; returns the whole dict.

    Tensors go to `map_location` (default: this rank's device, see `default_map_location`).
    Keys saved with `module.` (DDP) or `_orig_mod.` (torch.compile) prefixes load into a plain
    model and into wrapped ones. The global RNGs are left alone: call `set_rng_state(ckpt["rng"])`
    to continue the random stream exactly (`resume_or_start` does).
    """
    path = Path(path)
    ckpt = _read(path, default_map_location() if map_location is None else map_location)
    if model is not None:
        _load_model(path, model, ckpt["model"])
    _load_part(path, "optimizer", optimizer, ckpt.get("optimizer"))
    _load_part(path, "scheduler", scheduler, ckpt.get("scheduler"))
    _load_part(path, "scaler", scaler, ckpt.get("scaler"))
    return ckpt


def resume_or_start(
    folder, *, model, optimizer=None, scheduler=None, scaler=None, map_location=None, log=print
) -> dict | None:
    """Load the newest usable checkpoint in `folder` and restore the RNGs; None if there is none.

    An unreadable newest file (truncated, corrupt, refused) is skipped with a message, and the
    previous one is tried: a run should lose a few steps, never everything.
    """
    candidates = list_checkpoints(folder)
    for path in reversed(candidates):
        try:
            ckpt = load_checkpoint(
                path,
                model=model,
                optimizer=optimizer,
                scheduler=scheduler,
                scaler=scaler,
                map_location=map_location,
            )
        except CheckpointError as e:
            log(f"checkpoint: skipping unusable {e}")
            continue
        if ckpt.get("rng") is not None:
            set_rng_state(ckpt["rng"])
        log(f"checkpoint: resumed from {path.name} (epoch {ckpt['epoch']}, step {ckpt['step']})")
        return ckpt
    if candidates:
        log(
            f"checkpoint: none of the {len(candidates)} checkpoints in {folder} is usable; "
            "starting from scratch"
        )
    else:
        log(f"checkpoint: none in {folder}; starting from scratch")
    return None
