"""Checkers of lesson 06, checkpointing and fault tolerance.

06.1, 06.2 and 06.3 are code. Their probes run the learner's function in the learner's process
on objects the check builds from its own draws, and report what came back as plain data:
06.1 the dict `make_checkpoint` returned for a wrapped model (the checker rebuilds the same model,
optimizer and scheduler and compares every part); 06.2 what `atomic_save` did to a file that
already held a checkpoint, seen at each rename (an audit hook: the source's bytes and the
target's at the moment of the rename) and after it, then after a save that fails halfway (the
checker loads the bytes itself, with weights_only=True); 06.3 what `safe_load` returned for a
file saved on a "GPU" (its storages tagged cuda:0) and whether a malicious file's code ran.
06.4 is a run, graded on what only the run can produce: the checker draws a seed and a number
of steps, the learner's function runs the program with them in processes of its own, stops it
with a signal and resumes it; the probe returns the runs' history, the kernel's pid, the pids of
the processes the function started and the final checkpoint's bytes, and the checker trains the
same run uninterrupted itself and compares the final parameters bit for bit. Records written from
the kernel, or by processes the function did not start, are refused.
"""

import json
import random
from pathlib import Path

import torch

from course_utils import resumable
from course_utils.grading import (
    CheckFailed,
    NotAttempted,
    exercise,
    expect,
    held_out,
    run_probe,
)
from course_utils.grading.checks.lesson06_harness import (
    EPOCHS,
    final_hash,
    plain_part,
    run_atomic_save,
    run_make_checkpoint,
    run_preempt_and_resume,
    run_safe_load,
    trained_parts,
    uninterrupted,
    weights,
)

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


def _name(path: str, folder: Path) -> str:
    return Path(path).name if Path(path).parent == folder else path


@exercise(
    "06.2",
    "an atomic save",
    allows=("opens or removes files",),
    reference=(r"atomic_torch_save\(", r"atomic_write"),
)
def check_atomic_save(atomic_save, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    state = {"model": {"w": torch.randn(4, generator=gen)}, "step": int(seed % 1000) + 3}
    got = run_probe(run_atomic_save, atomic_save, state=state)
    path = Path(got["path"])
    folder, what = path.parent, "atomic_save(state, path) over an existing checkpoint"
    expect(got["saved"] is None, "a save without an error", got["saved"], what)
    expect(got["after"] is not None, f"a file at {path.name}", "no file", what)
    try:
        loaded = weights(got["after"])
    except Exception as e:
        raise CheckFailed(
            f"{what}: expected a file torch.load(weights_only=True) reads, got {type(e).__name__}"
        ) from None
    expect(_same(loaded, state), "the saved dict back, tensors bit for bit", "other values", what)
    onto = [r for r in got["renames"] if Path(r["dst"]) == path]
    seen = [f"{_name(r['src'], folder)} -> {_name(r['dst'], folder)}" for r in got["renames"]]
    expect(
        bool(onto),
        "os.replace(a temporary file in the same folder, path)",
        f"renames {seen}" if seen else "no rename onto path",
        what,
    )
    last = onto[-1]
    moved = f"os.replace({_name(last['src'], folder)!r}, {path.name!r})"
    expect(
        Path(last["src"]) != path,
        "a rename of another file onto path",
        f"{moved}, which moves nothing",
        what,
    )
    expect(
        Path(last["src"]).parent == folder,
        "the temporary file in the folder of path (a rename is atomic within one file system)",
        f"{moved} from another folder",
        what,
    )
    expect(
        last["dst_bytes"] == got["before"],
        "path untouched until the rename (the old checkpoint intact while the new one is written)",
        "path rewritten or gone when the rename came: write the temporary file, not path",
        what,
    )
    expect(
        last["src_bytes"] == got["after"] and last["same_file"],
        "the renamed file, complete, as the new checkpoint",
        "a file written after the rename, or a rename of an incomplete file",
        what,
    )
    expect(
        got["after_failure"] == got["after"],
        "the previous file intact after a save that failed halfway",
        "a broken or changed file: write a temporary file first, then os.replace it",
        "atomic_save of an object torch.save cannot pickle",
    )
    return "a failed save leaves the previous file intact; a good one appears in one rename"


# ---- 06.3 ---------------------------------------------------------------------------------


@exercise("06.3", "load a checkpoint without running code from it")
def check_safe_load(safe_load, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    state = {"model": {"w": torch.randn(3, generator=gen)}, "step": int(seed % 1000) + 3}
    got = run_probe(run_safe_load, safe_load, state=state)
    what = "safe_load of a checkpoint saved on a GPU (its tensors tagged cuda:0)"
    expect(
        got["raised"] is None,
        "the dict loaded onto the CPU (map_location='cpu': this node may have no GPU)",
        got["raised"],
        what,
    )
    expect(_same(got["value"], state), "the dict that was saved", "other values", what)
    expect(got["devices"] == ["cpu"], "tensors on the CPU (map_location)", got["devices"], what)
    expect(
        not got["ran"],
        "the malicious file refused",
        "its code ran (it created a folder); load with weights_only=True",
    )
    return "weights_only=True loads tensors and refuses code; map_location puts them on the CPU"


# ---- 06.4 ---------------------------------------------------------------------------------

STEPS = (16, 24)  # the check draws the number of steps from this range, and a seed
SIGNALS = ("SIGUSR1", "SIGTERM")  # what Slurm sends before a time limit, and on preemption
PROGRAM = "python -m course_utils.jobs.resumable_train"


def _runs(history: list[dict]) -> str:
    """The history in a few words: 'start@0, stopped SIGUSR1@6, start@6, finished@24'."""
    words = {"start": "resumed_from", "stopped": "step", "finished": "step"}
    return ", ".join(
        f"{e.get('event')}{' ' + str(e['signal']) if 'signal' in e else ''}"
        f"@{e.get(words.get(e.get('event'), 'step'))}"
        for e in history
    )


def verify_runs(history, kernel: int, seed: int, steps: int, started=None) -> dict:
    """The checks of 06.4 on the runs' records (pure, so tests can give it records): returns
    the stop record. Every record must come from a process other than the kernel's, one of
    those it `started` during the check where the probe could list them (None: it could not)."""
    expect(
        type(history) is list and all(type(e) is dict for e in history),
        f"a list of records in {resumable.HISTORY}",
        type(history).__name__,
    )
    pids = [e.get("pid") for e in history]
    expect(
        all(type(p) is int for p in pids),
        "records that carry the pid of the process that wrote them (resumable.record)",
        "a record without one",
    )
    runs = _runs(history)
    starts = [e for e in history if e.get("event") == "start"]
    for start in starts:
        config = start.get("config") if type(start.get("config")) is dict else {}
        given = {"seed": seed, "max_steps": steps, "epochs": EPOCHS}
        used = {k: config.get(k) for k in given}
        expect(
            used == given,
            f"runs with --seed {seed} --max-steps {steps} --epochs {EPOCHS} (what the check gave)",
            f"a run with {used}",
        )
    expect(
        kernel not in pids,
        f"records written by the program ({PROGRAM}) in processes of its own",
        "records written from this kernel: run the program, do not train or write them here",
    )
    expect(
        started is None or set(pids) <= set(started),
        "records written by the processes your function started during the check",
        "records of processes it did not start",
    )
    stops = [i for i, e in enumerate(history) if e.get("event") == "stopped"]
    expect(
        bool(stops) and history[stops[0]].get("signal") in SIGNALS,
        "a run stopped by a signal (SIGUSR1, as Slurm sends) that saved and exited",
        f"runs {runs} (send the signal while it trains)",
    )
    stop = history[stops[0]]
    before = [e for e in history[: stops[0]] if e.get("event") == "start"]
    expect(
        bool(before) and before[-1]["pid"] == stop["pid"],
        "the stop recorded by the run that started before it (the same process)",
        f"runs {runs}",
    )
    later = [e for e in history[stops[0] :] if e.get("event") == "start"]
    expect(
        bool(later) and later[0].get("resumed_from") == stop.get("step"),
        f"a second run that resumed from step {stop.get('step')}, where the signal saved",
        f"runs {runs}",
    )
    expect(
        later[0]["pid"] != stop["pid"],
        "the resumed run in a new process, as a requeued job starts one",
        "the same process as the stopped run",
    )
    last = history[-1]
    expect(
        last.get("event") == "finished"
        and last.get("step") == steps
        and last["pid"] == later[-1]["pid"],
        f"the resumed run to finish at step {steps}",
        f"runs {runs}",
    )
    expect(
        type(stop.get("step")) is int and 0 < stop["step"] < steps,
        f"the signal before the last step ({steps})",
        f"a stop at step {stop.get('step')}",
    )
    return stop


def draw_run(rng=None) -> tuple[int, int]:
    """A seed and a number of steps for one check: drawn each time, so no history is ready."""
    rng = rng or random.SystemRandom()
    return rng.randrange(1, 100_000), rng.randint(*STEPS)


@exercise(
    "06.4",
    "survive a signal and resume exactly (run the program for real)",
    allows=("starts processes", "exits or kills the process"),
    reference=(r"\btrain\(", r"\brecord\(", r"history\.json"),
)
def check_preempt_and_resume(preempt_and_resume, seed: int | None = None, steps: int | None = None):
    if seed is None or steps is None:
        seed, steps = draw_run()
    got = run_probe(run_preempt_and_resume, preempt_and_resume, seed=seed, steps=steps)
    if got["history"] is None:
        raise NotAttempted(
            f"run the program first: preempt_and_resume(ckpt_dir, seed, steps) starts {PROGRAM} "
            f"with --ckpt-dir ckpt_dir, signals it and starts it again; no {resumable.HISTORY} "
            "in the folder the check gave"
        )
    try:
        history = json.loads(got["history"])
    except ValueError:
        raise CheckFailed(
            f"expected {resumable.HISTORY} as the program writes it, got other text"
        ) from None
    stop = verify_runs(history, got["kernel"], seed, steps, got["started"])
    expect(got["final"] is not None, "a final checkpoint in the folder", "none")
    want = uninterrupted(seed, steps)
    expect(
        final_hash(got["final"]) == want,
        "final parameters bitwise equal to the check's own uninterrupted run at its seed",
        "different parameters (resume with the same settings and folder)",
    )
    return (
        f"stopped by {stop['signal']}, saved, resumed in a new process, and ended bit for bit as "
        "the check's own uninterrupted run"
    )


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("06.1", cases=2)
def held_out_checkpoint(rng, make_checkpoint):
    """Another model, epoch and step: a dict with the visible epoch 2, step 17 typed in fails."""
    seed, epoch, step = rng.randrange(1, 2**20), rng.randint(3, 99), rng.randint(18, 9_999)
    check_make_checkpoint(make_checkpoint, seed=seed, epoch=epoch, step=step)
