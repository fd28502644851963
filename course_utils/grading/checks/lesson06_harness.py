"""What lesson 06's exercises hand the learner's code: the probes, run in the learner's process.

06.1: the learner's `make_checkpoint` on a model the check builds from its seed, wrapped by
torch.compile and by nn.DataParallel, with the global RNG seeded just before the call.
06.2: their `atomic_save` over a file that holds a checkpoint, every rename seen by Python's
audit hook as it begins (the source's bytes and inode, the target's bytes), then a save that
fails halfway; every file as bytes, for the checker to load with weights_only=True itself.
06.3: their `safe_load` on a checkpoint saved as a GPU job saves it (storages tagged cuda:0) and
on a file whose unpickling would create a folder.
06.4: their `preempt_and_resume` on a fresh folder with the check's seed and steps; the runs'
history, the newest checkpoint's bytes, this kernel's pid and the pids of the processes it
started during the call (its descendants, polled from /proc).
What these report comes from the learner's process: the checker (lesson06.py) recomputes every
reference itself; `uninterrupted` is its own run of 06.4's program at the same draw, and
`final_hash` and `weights` read the learner's bytes with weights_only=True.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from unittest import mock

import torch
from torch import nn

from course_utils import checkpoint as ck
from course_utils import resumable
from course_utils.grading import CheckFailed, probe, wire
from course_utils.grading.evidence import outcome
from course_utils.models import TinyNet, parameter_hash


def weights(data: bytes) -> object:
    """A file's bytes loaded here, as a checkpoint loader should: weights_only=True."""
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")


def plain_part(value):
    """`value` as the checker may read it; a part that is not plain data (a module, an
    optimizer) becomes a note naming its class, so the message can say what came."""
    try:
        return wire.decode(wire.encode(value))
    except Exception:  # not plain, or not even picklable
        return {"not plain data": type(value).__name__}


# ---- 06.1 ---------------------------------------------------------------------------------


def trained_parts(seed: int):
    """A model with dropout, SGD with momentum and a StepLR, one step into training: the same
    objects for the same seed, in the learner's process and in the checker's."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 3), nn.Dropout(0.1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    sched.step()
    return model, opt, sched


WRAPPERS = {"torch.compile": torch.compile, "nn.DataParallel": nn.DataParallel}  # both on a CPU


@probe("06.1")
def run_make_checkpoint(make_checkpoint, seed: int, epoch: int, step: int) -> dict:
    """In the learner's process: their dict for the model wrapped each way, with the global RNG
    seeded just before the call (`seed + 1`); the notebook's own RNG is left as it was."""
    got = {}
    with torch.random.fork_rng(devices=[]):
        model, opt, sched = trained_parts(seed)
        for name, wrap in WRAPPERS.items():
            torch.manual_seed(seed + 1)
            made = make_checkpoint(wrap(model), opt, sched, epoch, step)
            got[name] = (
                {str(k): plain_part(v) for k, v in made.items()}
                if type(made) is dict
                else {"not a dict": type(made).__name__}
            )
    return got


# ---- 06.2 ---------------------------------------------------------------------------------

_RENAMES: list | None = None  # while a probe records: what each rename found, as it began
_HOOKED = False


def _read(path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _on_audit(event: str, args: tuple) -> None:
    """Python's audit hook (os.rename and os.replace raise "os.rename" before they act): the
    source's and the target's bytes at that moment, and the source's inode."""
    renames = _RENAMES
    if renames is None or event != "os.rename":
        return
    try:
        src, dst = os.path.abspath(os.fsdecode(args[0])), os.path.abspath(os.fsdecode(args[1]))
        inode = os.stat(src).st_ino if os.path.exists(src) else None
        found = {"src": src, "dst": dst, "src_bytes": _read(src), "src_inode": inode}
        renames.append({**found, "dst_bytes": _read(dst)})
    except Exception:  # a hook must never break the learner's call
        renames.append(
            {"src": "?", "dst": "?", "src_bytes": None, "src_inode": None, "dst_bytes": None}
        )


def _recording_renames():
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_on_audit)  # stays for the process; idle unless _RENAMES is a list
        _HOOKED = True
    return _Recording()


class _Recording:
    def __enter__(self) -> list:
        global _RENAMES
        _RENAMES = []
        return _RENAMES

    def __exit__(self, *exc) -> None:
        global _RENAMES
        _RENAMES = None


@probe("06.2")
def run_atomic_save(atomic_save, state: dict) -> dict:
    """In the learner's process: a folder whose ckpt.pt already holds a checkpoint; their save
    of `state` over it, its renames recorded; then a save that fails halfway (a lambda cannot
    be pickled). Every file as bytes, for the checker to load itself."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ckpt.pt"
        torch.save({"previous": torch.zeros(2)}, path)
        before = path.read_bytes()
        with _recording_renames() as renames:
            saved = outcome(atomic_save, state, path)
        inode = path.stat().st_ino if path.exists() else None
        after = _read(path)
        with _recording_renames():
            failed = outcome(atomic_save, {**state, "bad": lambda: 0}, path)
        return {
            "path": str(path),
            "before": before,
            "saved": saved.get("raised"),
            "renames": [{**r, "same_file": r["src_inode"] == inode} for r in renames],
            "after": after,
            "failed": failed.get("raised"),
            "after_failure": _read(path),
        }


# ---- 06.3 ---------------------------------------------------------------------------------


class _Payload:
    """Unpickling this creates a folder: a harmless stand-in for malicious code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _devices(value) -> list[str]:
    if isinstance(value, torch.Tensor):
        return [value.device.type]
    if isinstance(value, dict):
        return [d for v in value.values() for d in _devices(v)]
    if isinstance(value, (list, tuple)):
        return [d for v in value for d in _devices(v)]
    return []


@probe("06.3")
def run_safe_load(safe_load, state: dict) -> dict:
    """In the learner's process: `state` saved as a GPU job saves it (every storage tagged
    cuda:0), loaded with their function; then a file whose unpickling would create a folder."""
    with tempfile.TemporaryDirectory() as tmp:
        good, bad, marker = Path(tmp) / "good.pt", Path(tmp) / "bad.pt", Path(tmp) / "PWNED"
        with mock.patch.object(torch.serialization, "location_tag", lambda storage: "cuda:0"):
            torch.save(state, good)
        loaded = outcome(safe_load, good)
        value = loaded.get("value")
        report = {
            "raised": loaded.get("raised"),
            "value": plain_part(value),
            "devices": sorted(set(_devices(value))),
        }
        torch.save({"model": _Payload(marker), "step": 3}, bad)
        refused = outcome(safe_load, bad)
        report.update(bad_raised=refused.get("raised"), ran=marker.exists())
        return report


# ---- 06.4 ---------------------------------------------------------------------------------


def _descendants(pid: int) -> set[int]:
    """The processes below `pid` now, from Linux's /proc/PID/task/TID/children lists."""
    found, todo = set(), [pid]
    while todo:
        for listing in Path(f"/proc/{todo.pop()}/task").glob("*/children"):
            try:
                children = [int(word) for word in listing.read_text().split()]
            except (OSError, ValueError):  # the process ended meanwhile
                continue
            todo += [child for child in children if child not in found]
            found.update(children)
    return found


class _Started:
    """The processes this one starts while the block runs, children and theirs, polled every
    `every` seconds; `seen` stays None where /proc does not list a process's children."""

    def __init__(self, every: float = 0.02):
        self.every, self.seen = every, None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.wait(self.every):
            self.seen |= _descendants(os.getpid())

    def __enter__(self) -> _Started:
        if Path(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/children").exists():
            self.seen = set()
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.seen is not None:
            self._done.set()
            self._thread.join()
            self.seen |= _descendants(os.getpid())


@probe("06.4")
def run_preempt_and_resume(preempt_and_resume, seed: int, steps: int) -> dict:
    """In the learner's process: their function on a fresh folder with the check's seed and
    steps; then what the runs left there (history, newest checkpoint), this kernel's pid and the
    pids of the processes it started meanwhile (None where /proc cannot tell)."""
    folder = Path(tempfile.mkdtemp(prefix="course-06.4-")) / "ckpt"
    try:
        with _Started() as started:
            preempt_and_resume(folder, seed, steps)
        history = folder / resumable.HISTORY
        newest = ck.latest_checkpoint(folder)
        return {
            "kernel": os.getpid(),
            "started": sorted(started.seen) if started.seen is not None else None,
            "history": history.read_text() if history.is_file() else None,
            "final": newest.read_bytes() if newest is not None else None,
        }
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)


# ---- 06.4: the checker's own run, and its reading of the learner's checkpoint (in the judge) ---

EPOCHS, SAVE_EVERY = 3, 3  # the program's settings the lesson fixes (8 steps per epoch)


def uninterrupted(seed: int, steps: int) -> str:
    """The same run, trained here in one go (the check's own reference): its parameter hash."""
    folder = tempfile.mkdtemp(prefix="course-06.4-reference-")
    config = resumable.Config(
        ckpt_dir=folder, seed=seed, max_steps=steps, epochs=EPOCHS, save_every=SAVE_EVERY
    )
    try:
        with torch.random.fork_rng(devices=[]):
            return resumable.train(config, log=lambda msg: None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def final_hash(data: bytes) -> str:
    """The parameter hash of a checkpoint's model, loaded here with weights_only=True."""
    try:
        state = weights(data)["model"]
        with torch.random.fork_rng(devices=[]):
            model = TinyNet()
        model.load_state_dict(state)
    except Exception as e:
        raise CheckFailed(
            f"expected the newest checkpoint readable as the program writes it (weights_only=True,"
            f" a TinyNet's model), got {type(e).__name__}: {str(e)[:120]}"
        ) from None
    return parameter_hash(model)
