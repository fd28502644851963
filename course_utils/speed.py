"""Making training fast, one measured step at a time (lesson 08 and `python -m benchmarks`).

`tuning_steps` lists the changes the cluster documentation recommends, in order; `tune` applies
them to a Recipe one at a time and keeps a change only when it made training faster on this
device. Each candidate is measured in pairs with the best recipe so far, back to back,
alternating which goes first, and `course_utils.paired` decides from the pairs' ratios and the
99% interval of their median: "faster" (kept), "slower", "no difference" (within the smallest
gain worth keeping), or "undecided after N pairs" when the step's budget ran out (each
dropped). A compute-side step dropped while the loader still limited the job is tried again
once a loader-side step has moved the bottleneck (lesson 08.2's rule: a fix to the part that
does not limit the job cannot show). Steps that cannot run here (pinned memory without a GPU)
are skipped with the reason. `compare` measures two Recipes the same way; `results_table` and
`plot_steps` show the steps; `bottleneck` (exercise 08.2's reference answer) says whether
loading or computing limits a job.

The Recipes are measured warm (`throughput.Bench`): each built and warmed up once, before its
first pair, so compilation, DataLoader worker start-up, the first batches and the allocator's
growth stay out of every measurement. Its neighbours, which lesson 08 calls by their own names:
the Recipe and its measurement in `course_utils.throughput` (`throughput.NAIVE`,
`throughput.measure`), the malloc setting in `course_utils.hpc` (`hpc.steady_allocator`), the
line profiler in `course_utils.profiling`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from course_utils import hpc, paired
from course_utils.tables import text_table
from course_utils.throughput import NAIVE, Bench, Recipe

SIDES = ("loader", "compute")
# How `tune` judges steps, stored with each benchmark record so a plot can say which method
# produced it (records without it predate the re-try).
TUNE_METHOD = (
    "one step at a time, measured in pairs with the best recipe (alternating, each warm) and "
    "kept when the 99% interval of the paired ratios' median lies above 1; compute-side steps "
    "dropped while loader-bound re-tried after"
)
SPREAD_TUNE_METHOD = (  # records made before the pairs: a change beyond the best's own spread
    "one step at a time, kept when faster than the spread of the best recipe's own "
    "measurements; compute-side steps dropped while loader-bound re-tried after"
)
OLD_TUNE_METHOD = (  # records made before the spread: each step against a fixed 3% threshold
    "one step at a time; compute-side steps dropped while loader-bound re-tried after"
)
BUDGET = 20.0  # seconds of paired measurements per step before it is "undecided"


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
    images_per_second: float | None  # the candidate's median rate; None: not measured here
    kept: bool
    note: str  # why it was kept, dropped or skipped
    best_per_second: float | None = None  # the best recipe's median rate, in the same pairs
    retried: bool = False  # a second verdict, after a loader-side step moved the bottleneck
    ratios: tuple = ()  # the candidate's rate over the best's, one per pair, in order
    low: float | None = None  # the 99% interval of their median (None: too few pairs)
    high: float | None = None
    verdict: str = ""  # paired's verdict: faster, slower, no difference, undecided

    @property
    def skipped(self) -> bool:
        return self.images_per_second is None

    @property
    def pairs(self) -> int:
        return len(self.ratios)

    @property
    def ratio(self) -> float | None:
        """The median paired ratio: how many times as fast as the best recipe beside it."""
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def no_difference(self) -> bool:
        """Measured, and its interval within the smallest gain worth keeping."""
        return self.verdict == paired.SAME


def tune(
    dataset,
    device="cpu",
    steps: list[Step] | None = None,
    start: Recipe = NAIVE,
    bench: Callable[[Recipe], float] | None = None,
    retry: bool = True,
    budget: float = BUDGET,
    min_gain: float = paired.MIN_GAIN,
    max_pairs: int = 200,
) -> tuple[Recipe, list[StepResult]]:
    """Apply `steps` one at a time; keep a step when `paired.compare` finds the candidate
    faster than the best recipe so far. Returns the tuned Recipe and one StepResult per verdict,
    starting with the baseline.

    Each step measures pairs (the candidate and the best, back to back, alternating which goes
    first) until the 99% interval of the ratios' median excludes 1 or lies within `min_gain`,
    or `budget` seconds (`max_pairs` pairs) have gone: "undecided after N pairs". An outlier
    moves each end of the interval by one rank at most, and each step's pairs are its own, so
    no burst of other work carries into a later verdict.

    `retry`: a compute-side step dropped before a loader-side step was kept was judged while the
    loader may have limited the job, where no compute fix can show; after the first pass each
    such step is measured once more, in order, against the best recipe then (re-tries kept
    before it included), and its second verdict appended (a row with `retried=True`).
    `bench(recipe) -> images/s` measures (default: a `throughput.Bench` on `dataset` and
    `device`; pass your own to choose its seconds per measurement, or a fake in tests); where
    it has `warm(recipe)`, each candidate is built and warmed up before its first pair."""
    device = torch.device(device)
    steps = tuning_steps() if steps is None else steps
    bench = Bench(dataset, device) if bench is None else bench
    judge = _Judge(bench, start, dict(budget=budget, min_gain=min_gain, max_pairs=max_pairs))
    results = [StepResult("baseline (documentation script)", judge.start_rate, True, "as written")]
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
    """Measures each candidate in pairs with the best recipe so far; keeps it when faster."""

    def __init__(self, bench, start: Recipe, how: dict):
        self.bench, self.how, self.best = bench, how, start
        self.start_rate = bench(start)  # warms the start recipe up, and the table's first row

    def __call__(self, step: Step, name: str | None = None, why: str = "") -> StepResult:
        name, candidate = name or step.name, replace(self.best, **step.changes)
        if candidate == self.best:
            note = "not measured: already in the recipe"
            return StepResult(name, None, False, note, retried=bool(why))
        verdict = measure_pairs(self.bench, self.best, candidate, **self.how)
        kept = verdict.verdict == paired.FASTER
        if kept:
            self.best = candidate
        return StepResult(
            name,
            statistics.median(verdict.candidate),
            kept,
            f"{verdict.words}: {'kept' if kept else 'dropped'}{why}",
            statistics.median(verdict.baseline),
            bool(why),
            verdict.ratios,
            verdict.low,
            verdict.high,
            verdict.verdict,
        )

    def again(self, step: Step, after: str) -> StepResult:
        """A second verdict on a step dropped before the loader-side step `after` was kept."""
        return self(step, f"{step.name} (re-tried)", f" (re-tried after {after!r} was kept)")


def measure_pairs(bench, baseline: Recipe, candidate: Recipe, **how) -> paired.Verdict:
    """`candidate` against `baseline` by `paired.compare`, each measured by `bench` (warmed up
    first where `bench` can: nothing of the set-up is timed, nor counted in the budget)."""
    warm = getattr(bench, "warm", None)
    if warm is not None:
        warm(baseline)
        warm(candidate)
    return paired.compare(lambda: bench(candidate), lambda: bench(baseline), **how)


def compare(
    baseline: Recipe,
    candidate: Recipe,
    dataset=None,
    device="cpu",
    bench: Callable[[Recipe], float] | None = None,
    budget: float = BUDGET,
    min_gain: float = paired.MIN_GAIN,
    max_pairs: int = 200,
) -> paired.Verdict:
    """`candidate` against `baseline`, measured in pairs as `tune` measures each step: the
    Verdict holds the paired ratios (candidate over baseline), their interval, the verdict and
    every rate measured (`candidate_median`, `baseline_median`)."""
    bench = Bench(dataset, device) if bench is None else bench
    how = dict(budget=budget, min_gain=min_gain, max_pairs=max_pairs)
    return measure_pairs(bench, baseline, candidate, **how)


def results_table(results: list[StepResult]) -> str:
    """The steps as a text table, one row per verdict: the candidate's median images/s and the
    best recipe's in the same pairs, how many pairs, the median of their ratios (candidate over
    best), the 99% interval of that median, and the verdict."""

    def rate(value):
        return "-" if value is None else f"{value:,.0f}"

    def interval(r):
        return "-" if r.low is None else f"{r.low:.2f}-{r.high:.2f}x"

    rows = [
        [
            r.step,
            rate(r.images_per_second),
            rate(r.best_per_second),
            r.pairs or "-",
            "-" if r.ratio is None else f"{r.ratio:.2f}x",
            interval(r),
            r.note,
        ]
        for r in results
    ]
    header = ["step", "images/s", "best, paired", "pairs", "ratio", "99% interval", "verdict"]
    return text_table(header, rows, right=[1, 2, 3, 4, 5])


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
    best_per_second where recorded): each candidate's bar (its median rate), and beside it the
    best recipe's median rate in the same pairs. Skipped steps are left out;
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


def plot_pairs(results: list[StepResult], title: str, min_gain: float = paired.MIN_GAIN):
    """Each measured step's paired ratios (dots: the candidate's rate over the best's in one
    pair), the 99% interval of their median (a bar; green: kept) and the band within which a
    change is no gain worth keeping (grey). Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    measured = [r for r in results if r.ratios][::-1]  # first on top
    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.8 + 0.35 * len(measured))))
    ax.axvspan(1 / (1 + min_gain), 1 + min_gain, color="0.9")
    ax.axvline(1, color="0.5", linewidth=1)
    for y, r in enumerate(measured):
        ax.plot(r.ratios, [y] * r.pairs, "o", color="tab:blue", alpha=0.4, markersize=3)
        if r.low is not None:
            color = "tab:green" if r.kept else "black"
            ax.plot([r.low, r.high], [y, y], color=color, linewidth=5, alpha=0.6)
    ax.set_xscale("log")
    ax.set_yticks(range(len(measured)), [r.step for r in measured])
    ax.set_xlabel("candidate's rate / best recipe's rate, per pair (log scale; >1: faster)")
    legend = "dots: each pair; bars: 99% interval of their median (green: kept)"
    ax.set_title(f"{title}\n{legend}; grey: within {min_gain:.0%}", fontsize=10)
    fig.tight_layout()
    return fig
