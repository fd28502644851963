"""Checkers of lesson 01, tensors.

01.1 and 01.2 are measurements: the learner's function times its own work with
torch.utils.benchmark on a batch the checker draws, and a probe in the learner's process reports
what that run produced (the tensors' memory, the Measurements). The checker then times the same
two things itself, in pairs, back to back, alternating (`paired.compare`, the course's one
rule for two timings), and requires each of the learner's medians to be of the same size as
its own time of that operation, and nearer to it than to its time of the other: a Timer of
`pass`, or of a view where the copy should be, is far off. The learner's two medians must also
differ as the checker's pairs do: the slower operation at least 1/SAME_SIZE of the ratio the
checker measured times the faster one.
01.3 hands `to_numpy` a tensor that requires grad, a CPU tensor (its memory must be shared) and
a tensor that behaves as a GPU tensor does (`evidence.ReportsCuda`), so an answer that would
fail on a GPU fails here.
"""

import math

import numpy as np
import torch
from torch.utils import benchmark

from course_utils import paired
from course_utils.grading import call_answer, exercise, expect, held_out, run_probe
from course_utils.grading.probes.lesson01 import (
    BATCH,
    COLUMNS,
    batch_of,
    run_broadcast,
    run_flatten,
    run_to_numpy,
)

SAME_SIZE = 10.0  # the learner's median within this factor of the checker's own: what was timed
MIN_RUN = 0.02  # seconds of each of the checker's own measurements, two per pair
BUDGET = 2.0  # seconds of pairs: a hundredfold ratio is decided in 8 pairs, well within


def _own_pair(fast: tuple, slow: tuple) -> paired.Verdict:
    """The checker's own times of two statements ((stmt, globals) each), measured in pairs on
    the same machine; `candidate` holds the slow one's times, `baseline` the fast one's."""

    def timing(stmt, names):
        timer = benchmark.Timer(stmt, globals=names)
        return lambda: timer.blocked_autorange(min_run_time=MIN_RUN).median

    return paired.compare(timing(*slow), timing(*fast), higher_is_faster=False, budget=BUDGET)


def _slower(fast: float, slow: float, own: paired.Verdict, what: str, hint: str) -> None:
    """The learner's slow median over their fast one, against the checker's paired ratio."""
    measured = 1 / own.ratio  # how many times the slow one takes, in the checker's pairs
    least = max(1.0, measured / SAME_SIZE)
    expect(
        slow > least * fast,
        f"{hint}: at least {least:.3g}x (the check measured {measured:.3g}x, in {own.pairs} pairs)",
        f"{slow / fast:.3g}x",
        what,
    )


def _timed(
    records: dict, key: str, stmt_kind: str, own: float, what: str, other: tuple[str, float]
) -> float:
    """The learner's median for `key`, which must time `stmt_kind`: within SAME_SIZE of the
    check's own time for it (`own`), and nearer to it than to the check's own time for the
    `other` operation the exercise compares it with (kind, time). SAME_SIZE alone lets a load
    spike pass one operation timed in place of the other where the two differ about tenfold
    (01.2's loop and broadcast); the nearer of the two, on a log scale, needs a spike of about
    the square root of their ratio."""
    m = records.get(key)
    expect(
        m is not None,
        f"{key}: a Measurement of torch.utils.benchmark (Timer(...).blocked_autorange())",
        "something else (a number typed in, or another object)",
        what,
    )
    median = m["median"]
    other_kind, other_own = other
    nearer = median > 0 and abs(math.log(median / own)) < abs(math.log(median / other_own))
    expect(
        own / SAME_SIZE <= median <= own * SAME_SIZE and nearer,
        f"{key}: the time of {stmt_kind}, about {own * 1e6:.3g} us as the check measured it "
        f"({other_kind}: about {other_own * 1e6:.3g} us)",
        f"{median * 1e6:.3g} us for {m['stmt']!r}: time that operation itself",
        what,
    )
    return median


# ---- 01.1 ---------------------------------------------------------------------------------


@exercise("01.1", "flatten a batch without copying, and measure what a copy costs")
def check_flatten(batch_flatten, view_and_copy_costs, seed: int = 0):
    got = run_probe(run_flatten, batch_flatten, view_and_copy_costs, seed=seed)
    small = batch_of((8, 3, 4, 4), seed)
    flat = got["flat"]
    expect(type(flat) is torch.Tensor, "a tensor", type(flat).__name__, "batch_flatten")
    expect(tuple(flat.shape) == (8, 48), "shape (8, 48)", f"shape {tuple(flat.shape)}")
    expect(
        got["flat_shares"],
        "a view sharing the input's memory",
        "a copy (different data_ptr); use .view, .reshape or .flatten(1), not .clone()",
    )
    expect(torch.equal(flat, small.reshape(8, -1)), "the images flattened in order", "others")
    images = batch_of(BATCH, seed + 1)
    what = f"view_and_copy_costs on a batch of shape {BATCH}"
    records = got["records"]
    expect(type(records) is dict, "a dict with view, copy, view_time, copy_time", records, what)
    missing = [k for k in ("view", "copy", "view_time", "copy_time") if k not in records["keys"]]
    expect(not missing, "the keys view, copy, view_time, copy_time", f"no {missing}", what)
    expect(records["view_shares"], "'view' sharing the input's memory", "its own memory", what)
    expect(not records["copy_shares"], "'copy' in memory of its own (.clone())", "shared", what)
    expect(records["equal"], "'view' and 'copy' with equal values", "different values", what)
    expect(
        records["copy_bytes"] == images.nbytes,
        f"a copy of {images.nbytes:,} bytes",
        f"{records['copy_bytes']}",
        what,
    )
    own = _own_pair(("x.flatten(1)", {"x": images}), ("v.clone()", {"v": images.flatten(1)}))
    view_own, copy_own = own.baseline_median, own.candidate_median
    view = _timed(records, "view_time", "the view", view_own, what, ("the copy", copy_own))
    copy = _timed(records, "copy_time", "the copy", copy_own, what, ("the view", view_own))
    hint = "the copy slower than the view (it moves every byte; time the copy itself)"
    _slower(view, copy, own, what, hint)
    return f"the view shares the batch's {images.nbytes:,} bytes; the copy takes as many again"


# ---- 01.2 ---------------------------------------------------------------------------------


def _standardized(x: torch.Tensor) -> torch.Tensor:
    return (x - x.mean(dim=0)) / x.std(dim=0, unbiased=False)


def _loop(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for j in range(x.shape[1]):
        column = x[:, j]
        out[:, j] = (column - column.mean()) / column.std(unbiased=False)
    return out


@exercise("01.2", "standardize columns with broadcasting, measured against a loop")
def check_standardize(standardize, broadcast_vs_loop, seed: int = 0):
    x = torch.arange(12.0).reshape(4, 3) ** 1.5
    got = call_answer(standardize, x.clone())
    expect(type(got) is torch.Tensor, "a tensor", type(got).__name__)
    expect(got.shape == x.shape, f"shape {tuple(x.shape)}", f"shape {tuple(got.shape)}")
    expect(
        torch.allclose(got, _standardized(x), atol=1e-5),
        "each column with mean 0 and std 1",
        f"column means {got.mean(0).tolist()}",
        "standardize(x)",
    )
    big = batch_of(COLUMNS, seed)
    what = f"broadcast_vs_loop on a {COLUMNS} matrix"
    records = run_probe(run_broadcast, broadcast_vs_loop, seed=seed)
    expect(type(records) is dict, "a dict with result, broadcast_time, loop_time", records, what)
    missing = [k for k in ("result", "broadcast_time", "loop_time") if k not in records["keys"]]
    expect(not missing, "the keys result, broadcast_time, loop_time", f"no {missing}", what)
    result = records["result"]
    expect(
        result is not None
        and result.shape == big.shape
        and torch.allclose(result, _standardized(big), atol=1e-4),
        "'result': x standardized by column",
        "other values",
        what,
    )
    own = _own_pair(("f(x)", {"f": _standardized, "x": big}), ("f(x)", {"f": _loop, "x": big}))
    fast_own, slow_own = own.baseline_median, own.candidate_median
    loop = "a loop over the columns"
    fast = _timed(records, "broadcast_time", "standardize(x)", fast_own, what, (loop, slow_own))
    slow = _timed(records, "loop_time", loop, slow_own, what, ("broadcasting", fast_own))
    hint = "the loop over columns slower than broadcasting (time a Python loop over them)"
    _slower(fast, slow, own, what, hint)
    return f"broadcasting beats a loop over {COLUMNS[1]} columns, measured by torch.utils.benchmark"


# ---- 01.3 ---------------------------------------------------------------------------------


@exercise("01.3", "a tensor to NumPy, safely")
def check_to_numpy(to_numpy):
    got = run_probe(run_to_numpy, to_numpy)
    grad = got["grad"]
    expect("raised" not in grad, "an array from a tensor that requires grad", grad.get("raised"))
    value = grad["value"]
    expect(type(value) is np.ndarray, "a numpy.ndarray", type(value).__name__)
    expect(np.allclose(value, np.linspace(0, 2, 5)), "[0, 0.5, 1, 1.5, 2]", value.tolist())
    expect(got["shares"], "an array sharing memory with a CPU tensor", "a copy (use .numpy())")
    gpu = got["gpu"]
    expect(
        "raised" not in gpu,
        "an array from a GPU tensor too (copy it to the CPU first: .cpu())",
        gpu.get("raised"),
        "a tensor on cuda:0",
    )
    expect(
        type(gpu["value"]) is np.ndarray and np.allclose(gpu["value"], [1.0, 2.0, 3.0]),
        "[1, 2, 3]",
        repr(gpu["value"])[:80],
        "a tensor on cuda:0",
    )
    return "works on tensors that require grad and on GPU tensors, and shares memory on the CPU"


# ---- 01.4 ---------------------------------------------------------------------------------


@exercise("01.4", "a gradient with autograd")
def check_gradient(grad_of_loss):
    x = torch.tensor([1.0, -2.0, 3.0])
    got = call_answer(grad_of_loss, x.clone())
    want = 3 * x**2 + 2.0
    expect(type(got) is torch.Tensor, "a tensor", type(got).__name__)
    expect(torch.allclose(got, want), want.tolist(), got.tolist(), "gradient of sum(x**3 + 2x)")
    return "d/dx sum(x^3 + 2x) = 3x^2 + 2, computed by autograd"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("01.4", cases=3)
def held_out_gradient(rng, grad_of_loss):
    """Other points: the visible gradient [5.0, 14.0, 29.0] typed in fails them."""
    points = [round(rng.uniform(-3, 3), 2) for _ in range(rng.randint(2, 6))]
    x = torch.tensor(points)
    got = call_answer(grad_of_loss, x.clone())
    want = 3 * x**2 + 2.0
    right = type(got) is torch.Tensor and got.shape == want.shape and torch.allclose(got, want)
    shown = [round(v, 4) for v in want.tolist()]
    got_shown = got.tolist() if type(got) is torch.Tensor else repr(got)
    expect(right, shown, got_shown, f"gradient of sum(x**3 + 2x) at x={points}")


@held_out("01.1", cases=1)
def held_out_flatten(rng, batch_flatten, view_and_copy_costs):
    """Another batch, of another size: a flattened batch kept from the visible case fails it.
    The view and the timings are the visible case's to check: timing them again would only
    make the grade slower."""
    images = batch_of((rng.randint(2, 9), 3, 4, 4), rng.randrange(1, 2**20))
    got = call_answer(batch_flatten, images.clone())
    want = images.reshape(len(images), -1)
    expect(
        type(got) is torch.Tensor and got.shape == want.shape and torch.equal(got, want),
        f"the batch of shape {tuple(images.shape)} flattened to {tuple(want.shape)}",
        f"{type(got).__name__} of shape {tuple(getattr(got, 'shape', ()))}",
        "batch_flatten",
    )
