"""What lesson 06's exercises hand the learner's code: the probes, run in the learner's process.

06.1: the learner's `make_checkpoint` on a model the check builds from its seed, wrapped by
torch.compile and by nn.DataParallel, with the global RNG seeded just before the call.
06.2: their `atomic_save` over a file that holds a checkpoint, every rename seen by Python's
audit hook as it begins (the source's bytes and inode, the target's bytes), then a save that
fails halfway; every file as bytes, for the checker to load with weights_only=True itself.
06.3: their `safe_load` on a checkpoint saved as a GPU job saves it (storages tagged cuda:0) and
on a file whose unpickling would create a folder.
06.4: their `preempt_and_resume` on a fresh folder with the check's seed and steps; the runs'
history, the newest checkpoint's bytes and this kernel's pid.
What these report comes from the learner's process: the checker (lesson06.py) recomputes every
reference itself.
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path
from unittest import mock

import torch
from torch import nn

from course_utils import checkpoint as ck
from course_utils import resumable
from course_utils.grading import probe, wire
from course_utils.grading.evidence import outcome


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


@probe("06.4")
def run_preempt_and_resume(preempt_and_resume, seed: int, steps: int) -> dict:
    """In the learner's process: their function on a fresh folder with the check's seed and
    steps; then what the runs left there (history, newest checkpoint) and this kernel's pid."""
    folder = Path(tempfile.mkdtemp(prefix="course-06.4-")) / "ckpt"
    try:
        preempt_and_resume(folder, seed, steps)
        history = folder / resumable.HISTORY
        newest = ck.latest_checkpoint(folder)
        return {
            "kernel": os.getpid(),
            "history": history.read_text() if history.is_file() else None,
            "final": newest.read_bytes() if newest is not None else None,
        }
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)
