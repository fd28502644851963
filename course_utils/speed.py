"""Making training fast, one measured step at a time (lesson 08 and `python -m benchmarks`).

`tuning_steps` lists the changes the cluster documentation recommends, in order; `tune` applies
them to a Recipe one at a time, measures each (`throughput.measure`), and keeps a change only
when it made training measurably faster on this device: faster by more than the spread the run
measured (the best recipe, measured again beside each candidate, gives a range of rates for one
and the same recipe; a change inside that range is "no difference measured"). A compute-side
step dropped while the
loader still limited the job is tried again once a loader-side step has moved the bottleneck
(lesson 08.2's rule: a fix to the part that does not limit the job cannot show). Steps that
cannot run here (pinned memory without a GPU) are skipped with the reason. `compare` measures
two Recipes side by side; `results_table` and `plot_steps` show the steps; `bottleneck`
(exercise 08.2's reference answer) says whether loading or computing limits a job.

Its neighbours, which lesson 08 calls by their own names: the Recipe and its measurement in
`course_utils.throughput` (`throughput.NAIVE`, `throughput.measure`), the malloc setting in
`course_utils.hpc` (`hpc.steady_allocator`), the line profiler in `course_utils.profiling`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from course_utils import hpc
from course_utils.tables import text_table
from course_utils.throughput import (
    NAIVE,
    Recipe,
    measure,
)

SIDES = ("loader", "compute")
# How `tune` judges steps, stored with each benchmark record so a plot can say which method
# produced it (records without it predate the re-try).
TUNE_METHOD = (
    "one step at a time, kept when faster than the spread of the best recipe's own "
    "measurements; compute-side steps dropped while loader-bound re-tried after"
)
OLD_TUNE_METHOD = (  # records made before the spread: each step against a fixed 3% threshold
    "one step at a time; compute-side steps dropped while loader-bound re-tried after"
)


@dataclass(frozen=True)
class Step:
    """One tuning step: its name, the Recipe fields it sets, and what it needs to run."""

    name: str
    changes: dict = field(default_factory=dict)
    needs: str | None = None  # "cuda": skipped elsewhere
    why: str = ""
    side: str = "compute"  # "loader": it speeds up feeding batches; "compute": the step itself

    def __post_init__(self):
        if self.side not in SIDES:
            raise ValueError(f"side={self.side!r} is not one of {SIDES}; pass one of those")

    def applies_to(self, device: torch.device) -> bool:
        return self.needs is None or torch.device(device).type == self.needs


def tuning_steps(
    cpus: int | None = None, batch_sizes: tuple[int, ...] = (256, 512, 1024), compile: bool = True
) -> list[Step]:
    """The documentation's recommendations, in the order the lesson applies them.

    The batch size is raised in `batch_sizes` steps, each kept only while throughput still grows
    (on a CPU, large batches can fall out of the caches). compile=False leaves torch.compile out
    (it compiles for 10 s or more on a 2-core CPU; the benchmark measures it).
    """
    cpus = cpus or hpc.allocated_cpus()
    steps = [
        *(
            Step(
                f"batch size {b}",
                {"batch_size": b},
                why="fewer, larger steps: less Python and launch overhead per image",
            )
            for b in batch_sizes
        ),
        Step(
            f"{cpus} DataLoader workers",
            {"num_workers": cpus},
            side="loader",
            why="prepare batches in parallel with training (one per allocated CPU)",
        ),
        Step(
            "pinned memory, non_blocking",
            {"pin_memory": True},
            needs="cuda",
            side="loader",
            why="page-locked buffers: direct, asynchronous copies to the GPU",
        ),
        Step(
            "channels_last",
            {"channels_last": True},
            why="NHWC layout, what tensor-core and oneDNN convolutions prefer",
        ),
        Step(
            "autocast bf16 (with channels_last)",
            {"autocast": "bf16", "channels_last": True},
            why="bfloat16 matmuls and convolutions, float32 where precision matters; NHWC "
            "too, as tensor cores and AMX want (bf16 in NCHW can be slower than fp32)",
        ),
        Step(
            "TF32 and cudnn.benchmark",
            {"tf32": True, "cudnn_benchmark": True},
            needs="cuda",
            why="tensor-core float32 and the fastest convolution algorithm for these shapes",
        ),
        Step(
            "torch.compile",
            {"compile": True},
            why="fused kernels, less Python per step (compiles on the first steps)",
        ),
        Step(
            "CUDA graphs (compile mode reduce-overhead)",
            {"compile": True, "compile_mode": "reduce-overhead"},
            needs="cuda",
            why="record the step's kernel launches once, replay them: no launch overhead per "
            "kernel; needs static shapes and no host sync inside the step",
        ),
        Step(
            "batches from memory",
            {"loader": "memory", "num_workers": 0, "pin_memory": False},
            side="loader",
            why="the whole data set as one tensor on the device: no per-image collate, no copy",
        ),
    ]
    return [s for s in steps if compile or not s.changes.get("compile")]


@dataclass(frozen=True)
class StepResult:
    step: str
    images_per_second: float | None  # the candidate's rate; None: skipped on this device
    kept: bool
    note: str  # why it was kept, dropped or skipped
    best_per_second: float | None = None  # the best recipe's rate, measured beside the candidate
    retried: bool = False  # a second verdict, after a loader-side step moved the bottleneck
    spread: float | None = None  # the relative change the verdict needed: threshold or spread

    @property
    def skipped(self) -> bool:
        return self.images_per_second is None

    @property
    def no_difference(self) -> bool:
        """Measured, and within the spread of the measurements: neither faster nor slower."""
        return NO_DIFFERENCE in self.note


NO_DIFFERENCE = "no difference measured"
SETTLED = 3  # measurements of a new best recipe before its own spread replaces the last one


def tune(
    dataset,
    device="cpu",
    steps: list[Step] | None = None,
    start: Recipe = NAIVE,
    threshold: float = 0.03,
    pairs: int = 0,
    measure_fn: Callable[[Recipe], float] | None = None,
    retry: bool = True,
    **measure_kwargs,
) -> tuple[Recipe, list[StepResult]]:
    """Apply `steps` one at a time; keep a step when it is faster than the best so far by more
    than the spread measured, and at least by `threshold` (3%). Returns the tuned Recipe and one
    StepResult per verdict, starting with the baseline.

    The spread: the best recipe is measured again beside every candidate (`pairs` >= 1), so the
    run collects several rates of one and the same recipe; their range over their median is
    what a change must exceed (the best recipe's rates since it became best; until there are
    SETTLED of them, no less than the spread before; and the candidate's own rates when
    `pairs` >= 2). A change within it is "no difference measured".

    `retry`: a compute-side step dropped before a loader-side step was kept was judged while the
    loader may have limited the job, where no compute fix can show; after the first pass each
    such step is measured once more, in order, against the best recipe then (re-tries kept
    before it included), and its second verdict appended (a row with `retried=True`).
    `pairs` > 0: measure the best recipe and the candidate alternately, `pairs` times each, and
    compare the medians, so a change in the machine's load between steps is not taken for the
    step's effect (2 x `pairs` measurements per step instead of 1). Each result
    carries both rates its verdict compares. `measure_fn(recipe) -> images/s` replaces `measure`
    (tests pass a fake)."""
    device = torch.device(device)
    steps = tuning_steps() if steps is None else steps
    if measure_fn is None:

        def measure_fn(recipe):
            return measure(recipe, dataset, device, **measure_kwargs)

    judge = _Judge(measure_fn, start, threshold, pairs)
    results = [StepResult("baseline (documentation script)", judge.best_rate, True, "as written")]
    pending, to_retry = [], []  # compute-side steps dropped; (step, the loader step kept after)
    for step in steps:
        if not step.applies_to(device):
            note = f"skipped here: needs {step.needs}, running on {device.type}"
            results.append(StepResult(step.name, None, False, note))
            continue
        results.append(judge(step))
        if results[-1].kept and step.side == "loader":
            to_retry += [(dropped, step.name) for dropped in pending]
            pending = []
        elif not results[-1].kept and step.side == "compute":
            pending.append(step)
    if retry:
        results += [judge.again(step, after) for step, after in to_retry]
    return judge.best, results


class _Judge:
    """Measures each candidate against the best recipe so far; keeps it when it is faster by
    more than the spread measured (at least `threshold`)."""

    def __init__(self, measure_fn, start: Recipe, threshold: float, pairs: int):
        self.measure_fn, self.threshold, self.pairs = measure_fn, threshold, pairs
        self.best, self.best_rate = start, measure_fn(start)
        # The best recipe's measurements since it became best; the ones that made it best are
        # left out (of several noisy candidates, the one kept is more often a lucky one).
        self.best_rates = [self.best_rate]
        self.noise = 0.0  # their spread, and no less than the last until there are SETTLED

    def __call__(self, step: Step, name: str | None = None, why: str = "") -> StepResult:
        candidate = replace(self.best, **step.changes)
        if self.pairs:
            best, rates = _alternate(self.measure_fn, self.best, candidate, self.pairs)
            self.best_rates += best
            self.best_rate = statistics.median(best)
        else:
            rates = [self.measure_fn(candidate)]
        own = spread(self.best_rates)  # two or three rates understate it: keep the last one
        self.noise = own if len(self.best_rates) >= SETTLED else max(self.noise, own)
        rate, best_rate = statistics.median(rates), self.best_rate
        needed = max(self.threshold, self.noise, spread(rates))
        change = rate / best_rate - 1
        kept = change > needed
        if kept or change < -needed:
            verdict = f"(beyond {needed:.0%}): " + ("kept" if kept else "dropped")
        else:
            verdict = f"(within {needed:.0%}): {NO_DIFFERENCE}, dropped"
        note = f"{change:+.0%} vs best {verdict}{why}"
        if kept:
            self.best, self.best_rate, self.best_rates = candidate, rate, []
        return StepResult(
            name or step.name, rate, kept, note, best_rate, retried=bool(why), spread=needed
        )

    def again(self, step: Step, after: str) -> StepResult:
        """A second verdict on a step dropped before the loader-side step `after` was kept."""
        name, why = f"{step.name} (re-tried)", f" (re-tried after {after!r} was kept)"
        if replace(self.best, **step.changes) == self.best:
            return StepResult(
                name, None, False, "re-try not needed: already in the recipe", retried=True
            )
        return self(step, name, why)


def _alternate(measure_fn, a: Recipe, b: Recipe, repeats: int) -> tuple[list, list]:
    """The rates of `a` and `b` measured alternately, `repeats` times each."""
    rates_a, rates_b = [], []
    for _ in range(repeats):
        rates_a.append(measure_fn(a))
        rates_b.append(measure_fn(b))
    return rates_a, rates_b


def spread(rates) -> float:
    """How far measurements of one recipe lie apart: their range over their median (0 for one
    measurement)."""
    rates = list(rates)
    return (max(rates) - min(rates)) / statistics.median(rates) if len(rates) > 1 else 0.0


@dataclass(frozen=True)
class Comparison:
    naive: float  # median images/s
    tuned: float
    repeats: int
    naive_rates: tuple = ()  # each measurement, in order
    tuned_rates: tuple = ()
    threshold: float = 0.03  # the smallest change called a difference, whatever the spread

    @property
    def speedup(self) -> float:
        return self.tuned / self.naive

    @property
    def spread(self) -> float:
        """The larger spread of the two recipes' own measurements (see `spread`)."""
        return max(spread(self.naive_rates or [1]), spread(self.tuned_rates or [1]))

    @property
    def verdict(self) -> str:
        """ "faster", "slower" or "no difference measured": the change in medians against the
        spread of the measurements (at least `threshold`)."""
        needed = max(self.threshold, self.spread)
        if self.speedup - 1 > needed:
            return "faster"
        return "slower" if self.speedup - 1 < -needed else NO_DIFFERENCE


def compare(
    naive: Recipe,
    tuned: Recipe,
    dataset,
    device="cpu",
    repeats: int = 3,
    measure_fn: Callable[[Recipe], float] | None = None,
    **measure_kwargs,
) -> Comparison:
    """Naive and tuned measured side by side (alternating, `repeats` times each); medians."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be at least 1")
    if measure_fn is None:

        def measure_fn(recipe):
            return measure(recipe, dataset, device, **measure_kwargs)

    naive_rates, tuned_rates = _alternate(measure_fn, naive, tuned, repeats)
    medians = statistics.median(naive_rates), statistics.median(tuned_rates)
    return Comparison(*medians, repeats, tuple(naive_rates), tuple(tuned_rates))


def results_table(results: list[StepResult]) -> str:
    """The steps as a text table: each candidate's images/s, the best recipe's images/s measured
    beside it (the two numbers its verdict compares), and the verdict."""

    def rate(value):
        return "-" if value is None else f"{value:,.0f}"

    rows = [[r.step, rate(r.images_per_second), rate(r.best_per_second), r.note] for r in results]
    return text_table(["step", "images/s", "best, side by side", "verdict"], rows, right=[1, 2])


def bottleneck(loader_rate: float, compute_rate: float, measured_rate: float) -> tuple[str, float]:
    """Which part limits a job ("loader" or "compute") and the most that overlapping them gains.

    With DataLoader workers, loading the next batch overlaps with computing this one, so a step
    takes as long as the slower part: the slower part's rate over the measured rate bounds the
    speed-up. Rates are images per second (exercise 08.2 asks the learner to write this).
    """
    for name, rate in (
        ("loader_rate", loader_rate),
        ("compute_rate", compute_rate),
        ("measured_rate", measured_rate),
    ):
        if not rate > 0:
            raise ValueError(f"{name}={rate!r}: rates are images per second and must be > 0")
    limit = "loader" if loader_rate < compute_rate else "compute"
    return limit, min(loader_rate, compute_rate) / measured_rate


def plot_steps(rows: list[dict], title: str):
    """Bar chart of images/s per tuning step (dicts with step, images_per_second, kept, and
    best_per_second where recorded): each candidate's bar, and beside it the best recipe's rate
    measured side by side, the two numbers its verdict compared. Skipped steps are left out;
    a record without the best recipe's rates (taken before they were stored) says so in the
    title. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    measured = [r for r in rows if r["images_per_second"] is not None][::-1]  # first on top
    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.8 + 0.32 * len(measured))))
    at = range(len(measured))
    ax.barh(
        [y + 0.2 for y in at],
        [r["images_per_second"] for r in measured],
        height=0.4,
        color=["tab:green" if r["kept"] else "tab:gray" for r in measured],
    )
    best = [r.get("best_per_second") or 0 for r in measured]
    ax.barh([y - 0.2 for y in at], best, height=0.4, color="tab:blue", alpha=0.5)
    ax.set_yticks(list(at), [r["step"] for r in measured])
    ax.set_xlabel("training throughput (images/s)")
    legend = "green: kept, grey: dropped"
    legend += (
        ", blue: the best recipe measured beside it"
        if any(best)
        else "; the best recipe's rates beside each verdict were not recorded"
    )
    ax.set_title(f"{title}\n{legend}", fontsize=10)
    fig.tight_layout()
    return fig
