"""Checkers of lesson 06, checkpointing and fault tolerance."""

import os
import tempfile
from pathlib import Path
from unittest import mock

import torch
from torch import nn

from course_utils import checkpoint as ck
from course_utils import resumable
from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out
from course_utils.models import TinyNet, parameter_hash

KEYS = ("model", "optimizer", "scheduler", "epoch", "step", "rng")


def _trained_parts():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Dropout(0.1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    sched.step()
    return model, opt, sched


@exercise("06.1", "a complete checkpoint dict, from a wrapped model")
def check_make_checkpoint(make_checkpoint):
    model, opt, sched = _trained_parts()
    want_keys = list(model.state_dict())
    for wrapper in (torch.compile, nn.DataParallel):  # DataParallel runs on the CPU too
        rng = torch.get_rng_state()
        got = call_answer(make_checkpoint, wrapper(model), opt, sched, 2, 17)
        expect(isinstance(got, dict), "a dict", type(got).__name__)
        missing = [k for k in KEYS if k not in got]
        expect(not missing, f"keys {', '.join(KEYS)}", f"no {', '.join(missing)}")
        keys = list(got["model"])
        expect(
            keys == want_keys,
            f"model keys {want_keys[:2]} (unwrap the model first)",
            f"{keys[:2]} from a {wrapper.__name__} wrapper",
            "model",
        )
        expect(
            bool(got["optimizer"].get("state")),
            "the optimizer's momentum buffers",
            "an optimizer state without 'state'; use optimizer.state_dict()",
        )
        expect(
            got["scheduler"] == sched.state_dict(),
            "scheduler.state_dict()",
            got["scheduler"],
            "scheduler",
        )
        expect(
            (got["epoch"], got["step"]) == (2, 17),
            "epoch 2, step 17",
            f"epoch {got['epoch']}, step {got['step']}",
        )
        same_rng = isinstance(got["rng"], torch.Tensor) and torch.equal(got["rng"], rng)
        expect(
            same_rng,
            "torch.get_rng_state() at the time of the call",
            type(got["rng"]).__name__,
            "rng",
        )
    return "model (unwrapped), optimizer, scheduler, epoch, step and RNG state in one dict"


def _recording(calls):
    real_replace, real_rename = os.replace, os.rename

    def replace(src, dst, *a, **k):
        calls.append((Path(src), Path(dst)))
        return real_replace(src, dst, *a, **k)

    def rename(src, dst, *a, **k):
        calls.append((Path(src), Path(dst)))
        return real_rename(src, dst, *a, **k)

    return mock.patch.multiple(os, replace=replace, rename=rename)


@exercise("06.2", "an atomic save")
def check_atomic_save(atomic_save):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ckpt.pt"
        renames = []
        with _recording(renames):
            call_answer(atomic_save, {"w": torch.arange(3)}, path)
        expect(path.is_file(), f"a file at {path.name}", "no file")
        got = torch.load(path, weights_only=True)
        expect(torch.equal(got["w"], torch.arange(3)), "the saved tensor back", got)
        last = renames[-1] if renames else None
        seen = [(str(s), str(d)) for s, d in renames]
        expect(
            last is not None and last[1] == path and last[0].parent == path.parent,
            "os.replace(a temporary file in the same folder, path)",
            f"renames {seen}" if renames else "no rename",
        )
        try:  # torch.save cannot pickle a lambda: this save fails halfway
            call_answer(atomic_save, {"w": torch.ones(2), "bad": lambda: 0}, path)
        except NotImplementedError:
            raise
        except Exception:
            pass
        try:
            after = torch.load(path, weights_only=True)["w"]
        except Exception as e:
            raise CheckFailed(
                f"expected the previous file intact after a failed save, got a broken file "
                f"({type(e).__name__}); write a temporary file first, then os.replace it"
            ) from None
        expect(
            torch.equal(after, torch.arange(3)),
            "the previous file intact after a failed save",
            f"{after.tolist()}",
        )
    return "a failed save leaves the previous file intact; a good one appears in one rename"


class _Payload:
    """Unpickling this creates a folder: a harmless stand-in for malicious code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


@exercise("06.3", "load a checkpoint without running code from it")
def check_safe_load(safe_load):
    with tempfile.TemporaryDirectory() as tmp:
        good, bad, marker = Path(tmp) / "good.pt", Path(tmp) / "bad.pt", Path(tmp) / "PWNED"
        torch.save({"model": {"w": torch.ones(2)}, "step": 3}, good)
        got = call_answer(safe_load, good)
        expect(isinstance(got, dict) and got.get("step") == 3, "the dict saved in good.pt", got)
        expect(
            got["model"]["w"].device.type == "cpu",
            "tensors on the CPU (map_location)",
            got["model"]["w"].device,
        )
        torch.save({"model": _Payload(marker), "step": 3}, bad)
        try:
            call_answer(safe_load, bad)
        except NotImplementedError:
            raise
        except Exception:
            pass  # refusing the file is right
        expect(
            not marker.exists(),
            "the malicious file refused",
            "its code ran (it created a folder); load with weights_only=True",
        )
    return "weights_only=True loads tensors and refuses code"


def _runs(history: list[dict]) -> str:
    """The history in a few words: 'start@0, stopped SIGUSR1@6, start@6, finished@24'."""
    words = {"start": "resumed_from", "stopped": "step", "finished": "step"}
    return ", ".join(
        f"{e['event']}{' ' + e['signal'] if 'signal' in e else ''}@{e.get(words[e['event']])}"
        for e in history
    )


def _final_hash(folder: Path) -> str | None:
    newest = ck.latest_checkpoint(folder)
    if newest is None:
        return None
    model = TinyNet()
    ck.load_checkpoint(newest, model=model, map_location="cpu")
    return parameter_hash(model)


def _uninterrupted(config: dict, folder: Path) -> str:
    """The same settings, run here in one go: what an exact resume must end with."""
    settings = {k: v for k, v in config.items() if k in resumable.Config.__dataclass_fields__}
    settings.update(ckpt_dir=str(folder), step_delay=0.0)
    return resumable.train(resumable.Config(**settings), log=lambda msg: None)


@exercise("06.4", "survive a signal and resume exactly (run the program for real)")
def check_preempt_and_resume(preempt_and_resume):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ckpt"
        call_answer(preempt_and_resume, folder)
        history = resumable.read_history(folder)
        expect(
            bool(history),
            f"records in {resumable.HISTORY} from runs with --ckpt-dir set to the folder given",
            "none (did the program run, with that folder?)",
        )
        runs = _runs(history)
        stops = [i for i, e in enumerate(history) if e["event"] == "stopped"]
        expect(
            bool(stops),
            "a run stopped by a signal (SIGUSR1, as Slurm sends) that saved and exited",
            f"runs {runs} (send the signal while it trains)",
        )
        stop = history[stops[0]]
        later = [e for e in history[stops[0] :] if e["event"] == "start"]
        expect(
            bool(later) and later[0]["resumed_from"] == stop["step"],
            f"a second run that resumed from step {stop['step']}, where the signal saved",
            f"runs {runs}",
        )
        expect(history[-1]["event"] == "finished", "the resumed run to finish", f"runs {runs}")
        config = later[0]["config"]
        final = _final_hash(folder)
        want = _uninterrupted(config, Path(tmp) / "uninterrupted")
        expect(
            final == want == history[-1]["hash"],
            "final parameters bitwise equal to an uninterrupted run with the same settings",
            "different parameters (resume with the same settings and folder)",
        )
        where = "under Slurm (requeued)" if stop.get("requeued") else "locally (no Slurm here)"
    # No step number: where the signal lands varies from run to run, and nbval compares this line.
    return f"stopped by {stop['signal']} {where}, saved, and resumed from that step exactly"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("06.1", cases=2)
def held_out_checkpoint(rng, make_checkpoint):
    """Another epoch and step: a dict with the visible epoch 2, step 17 typed in fails them."""
    model, opt, sched = _trained_parts()
    epoch, step = rng.randint(3, 99), rng.randint(18, 9_999)
    got = call_answer(make_checkpoint, nn.DataParallel(model), opt, sched, epoch, step)
    expect(isinstance(got, dict), "a dict", type(got).__name__)
    found = (got.get("epoch"), got.get("step"))
    expect(
        found == (epoch, step), f"epoch {epoch}, step {step}", f"epoch {found[0]}, step {found[1]}"
    )
