"""Checkers of lesson 06, checkpointing and fault tolerance (06.4, the run, is lesson06_resume.py).

06.1 (code): a probe runs the learner's `make_checkpoint` in their process on a model the check
builds from its own draws, wrapped each way, and reports the dict as plain data; the checker
rebuilds the same model, optimizer and scheduler and compares every part.
06.2 and 06.3 need no report of the learner's: the judge makes a folder in the learner's file
system from outside (judge/outside.py), writes the files, calls their function with plain data
and sees for itself what happened. 06.2: a checkpoint already at `path`; the folder's file events
(inotify) during the save must show `path` replaced by one rename of a file written and closed
beside it, never written in place; the bytes after it are read by the judge with
weights_only=True; then a save that fails halfway (a probe adds an object torch.save cannot
pickle) must leave them unchanged. 06.3: a checkpoint saved as a GPU job saves it (its storages
tagged cuda:0) must come back whole, and a file whose unpickling creates a folder must not create
it (the judge watches the folder: a folder made and removed again was still made).
"""

import contextlib
import io
import os
from unittest import mock

import torch

from course_utils.grading import (
    CheckFailed,
    call_answer,
    exercise,
    expect,
    held_out,
    outside,
    run_probe,
)
from course_utils.grading.judge.proxies import AnswerRaised
from course_utils.grading.probes.lesson06 import (
    plain_part,
    run_make_checkpoint,
    save_unpicklable,
    trained_parts,
)


def weights(data: bytes) -> object:
    """A file's bytes loaded here, as a checkpoint loader should: weights_only=True."""
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")


KEYS = ("model", "optimizer", "scheduler", "epoch", "step", "rng")


def _same(got, want) -> bool:
    """Plain data equal part by part, exact types, tensors bit for bit."""
    if type(want) is torch.Tensor:
        return type(got) is torch.Tensor and got.dtype == want.dtype and torch.equal(got, want)
    if type(want) is dict:
        return (
            type(got) is dict
            and set(got) == set(want)
            and all(_same(got[k], want[k]) for k in want)
        )
    if type(want) in (list, tuple):
        return (
            type(got) in (list, tuple)
            and len(got) == len(want)
            and all(_same(a, b) for a, b in zip(got, want, strict=True))
        )
    return type(got) is type(want) and got == want


# ---- 06.1 ---------------------------------------------------------------------------------


@exercise("06.1", "a complete checkpoint dict, from a wrapped model")
def check_make_checkpoint(make_checkpoint, seed: int = 0, epoch: int = 2, step: int = 17):
    got = run_probe(run_make_checkpoint, make_checkpoint, seed=seed, epoch=epoch, step=step)
    with torch.random.fork_rng(devices=[]):
        model, opt, sched = trained_parts(seed)
    want = {
        "model": plain_part(model.state_dict()),
        "optimizer": plain_part(opt.state_dict()),
        "scheduler": plain_part(sched.state_dict()),
        "rng": torch.Generator().manual_seed(seed + 1).get_state(),
    }
    keys = list(want["model"])
    for wrapper, made in got.items():
        what = f"make_checkpoint of a model wrapped by {wrapper}"
        expect("not a dict" not in made, "a dict", made.get("not a dict"), what)
        missing = [k for k in KEYS if k not in made]
        expect(not missing, f"keys {', '.join(KEYS)}", f"no {', '.join(missing)}", what)
        for key, value in made.items():
            if key in KEYS and type(value) is dict and "not plain data" in value:
                raise CheckFailed(
                    f"{what}: expected {key!r} as plain data (a state_dict(), a number, a "
                    f"tensor), got a {value['not plain data']}"
                )
        found = list(made["model"]) if type(made["model"]) is dict else made["model"]
        expect(
            found == keys,
            f"model keys {keys} (unwrap the model first)",
            f"{found}",
            f"{what}: model",
        )
        expect(_same(made["model"], want["model"]), "the model's own weights", "others", what)
        expect(
            _same(made["optimizer"], want["optimizer"]),
            "optimizer.state_dict(), with its momentum buffers",
            "something else",
            f"{what}: optimizer",
        )
        expect(
            _same(made["scheduler"], want["scheduler"]),
            "scheduler.state_dict()",
            made["scheduler"],
            f"{what}: scheduler",
        )
        numbers = (made["epoch"], made["step"])
        expect(
            all(type(n) is int for n in numbers) and numbers == (epoch, step),
            f"epoch {epoch}, step {step}",
            f"epoch {numbers[0]!r}, step {numbers[1]!r}",
            what,
        )
        expect(
            _same(made["rng"], want["rng"]),
            "torch.get_rng_state() at the time of the call",
            type(made["rng"]).__name__
            if type(made["rng"]) is not torch.Tensor
            else "another state",
            f"{what}: rng",
        )
    return "model (unwrapped), optimizer, scheduler, epoch, step and RNG state in one dict"


# ---- 06.2 ---------------------------------------------------------------------------------

CHECKPOINT = "ckpt.pt"


def renames_onto(events: list, name: str) -> tuple[list[str], list[str]]:
    """From a folder's file events, in order: the files renamed onto `name` (each as it was
    called before), and the other things done to `name` itself (opened, written)."""
    moved_from = {cookie: was for what, was, cookie in events if what == "moved from"}
    onto = [
        moved_from.get(cookie, "?")
        for what, n, cookie in events
        if what == "moved to" and n == name
    ]
    touched = [what for what, n, _ in events if n == name and what in ("opened", "modified")]
    return onto, touched


def verify_atomic_save(events: list, before: bytes, after: bytes | None, state: dict) -> None:
    """06.2's rules on what the judge saw of one good save (pure, so tests can give it events):
    `name` replaced by one rename of a complete file written beside it, never written in place."""
    what = "atomic_save(state, path) over an existing checkpoint"
    expect(after is not None, f"a file at {CHECKPOINT}", "no file", what)
    try:
        loaded = weights(after)
    except Exception as e:
        raise CheckFailed(
            f"{what}: expected a file torch.load(weights_only=True) reads, got {type(e).__name__}"
        ) from None
    expect(_same(loaded, state), "the saved dict back, tensors bit for bit", "other values", what)
    onto, touched = renames_onto(events, CHECKPOINT)
    expect(
        not touched,
        "path untouched until the rename (the old checkpoint intact while the new one is written)",
        f"path {' and '.join(sorted(set(touched)))} in place: write a temporary file, not path",
        what,
    )
    expect(
        bool(onto),
        "os.replace(a temporary file in the same folder, path)",
        "no rename onto path, as the file system saw it",
        what,
    )
    source = onto[-1]
    expect(
        source != "?",
        "the temporary file in the folder of path (a rename is atomic within one file system)",
        "a file renamed from another folder",
        what,
    )
    closed = [n for what_, n, _ in events if what_ == "closed after writing"]
    expect(
        source in closed,
        "the renamed file written and closed before the rename (complete)",
        f"{source!r} renamed without being written and closed in the folder first",
        what,
    )
    expect(after != before, "the new checkpoint in place of the old", "the old one", what)


@exercise(
    "06.2",
    "an atomic save",
    allows=("opens or removes files",),
    reference=(r"atomic_torch_save\(", r"atomic_write"),
)
def check_atomic_save(atomic_save, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    state = {"model": {"w": torch.randn(4, generator=gen)}, "step": int(seed % 1000) + 3}
    seen = outside(atomic_save)
    with seen.folder("course-06.2-") as folder:
        path = f"{folder}/{CHECKPOINT}"
        torch.save({"previous": torch.zeros(2)}, seen.path(path))
        before = seen.read_bytes(path)
        with seen.file_events(folder) as events:
            call_answer(atomic_save, state, path)
        after = seen.read_bytes(path)
        verify_atomic_save(events, before, after, state)
        with seen.file_events(folder) as events:
            run_probe(save_unpicklable, atomic_save, state=state, path=path)
        onto, touched = renames_onto(events, CHECKPOINT)
        expect(
            seen.read_bytes(path) == after and not onto and not touched,
            "the previous file intact after a save that failed halfway",
            "a broken or changed file: write a temporary file first, then os.replace it",
            "atomic_save of an object torch.save cannot pickle",
        )
    return "a failed save leaves the previous file intact; a good one appears in one rename"


# ---- 06.3 ---------------------------------------------------------------------------------


class _Payload:
    """Unpickling this creates a folder: a harmless stand-in for malicious code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


@exercise("06.3", "load a checkpoint without running code from it")
def check_safe_load(safe_load, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    state = {"model": {"w": torch.randn(3, generator=gen)}, "step": int(seed % 1000) + 3}
    seen = outside(safe_load)
    with seen.folder("course-06.3-") as folder:
        good, bad, marker = f"{folder}/good.pt", f"{folder}/bad.pt", f"{folder}/PWNED"
        with mock.patch.object(torch.serialization, "location_tag", lambda storage: "cuda:0"):
            torch.save(state, seen.path(good))  # as a GPU job saves it: storages on cuda:0
        torch.save({"model": _Payload(marker), "step": 3}, seen.path(bad))
        what = "safe_load of a checkpoint saved on a GPU (its tensors tagged cuda:0)"
        try:
            loaded = call_answer(safe_load, good)
        except AnswerRaised as e:
            raise CheckFailed(
                f"{what}: expected the dict loaded onto the CPU (map_location='cpu': this node "
                f"may have no GPU), got {e.kind}: {str(e)[:200]}"
            ) from None
        expect(_same(loaded, state), "the dict that was saved", "other values", what)
        with seen.file_events(folder) as events, contextlib.suppress(AnswerRaised):
            call_answer(safe_load, bad)  # refusing the file is right
        made = any(what == "created" and name == "PWNED" for what, name, _ in events)
        expect(
            not made and not seen.path(marker).exists(),
            "the malicious file refused",
            "its code ran (it created a folder); load with weights_only=True",
        )
    return "weights_only=True loads tensors and refuses code; map_location puts them on the CPU"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("06.1", cases=2)
def held_out_checkpoint(rng, make_checkpoint):
    """Another model, epoch and step: a dict with the visible epoch 2, step 17 typed in fails."""
    seed, epoch, step = rng.randrange(1, 2**20), rng.randint(3, 99), rng.randint(18, 9_999)
    check_make_checkpoint(make_checkpoint, seed=seed, epoch=epoch, step=step)
