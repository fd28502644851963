"""Lesson 06's probes: what its checks run in the learner's process.

06.1: the learner's `make_checkpoint` on a model the check builds from its seed, wrapped by
torch.compile and by nn.DataParallel, with the global RNG seeded just before the call.
06.2: their `atomic_save` of a state that torch.save cannot pickle, into a folder the judge made
and watches from outside (the good save is a plain call: see checks/lesson06.py).
06.3 and 06.4 need no probe: the judge writes their files, calls the learner's function with
plain data, and sees what happened from outside the learner's process (judge/outside.py).
"""

from __future__ import annotations

import torch
from torch import nn

from course_utils.grading import probe
from course_utils.grading.judge import wire
from course_utils.grading.judge.evidence import outcome


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


@probe("06.2/failing")
def save_unpicklable(atomic_save, state: dict, path: str) -> dict:
    """Their save of `state` plus a function (torch.save cannot pickle it): what it raised."""
    return outcome(atomic_save, {**state, "bad": lambda: 0}, path)
