"""Making training fast, one measured step at a time (lesson 08 and `python -m benchmarks`).

A `Recipe` says how the lesson CNN is trained: batch size, DataLoader workers, pinned memory,
channels_last, autocast, torch.compile, and where batches come from. `NAIVE` is the cluster
documentation's script as written (course_utils/train_cifar.py defaults). `tuning_steps` lists
the changes the documentation recommends, in order; `tune` applies them one at a time, measures
each with `measure`, and keeps a change only when it made training measurably faster on this
device. Steps that cannot run here (pinned memory without a GPU) are skipped with the reason.
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from course_utils import data, hpc, models, precision, train
from course_utils.tables import text_table

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
LOADERS = ("dataloader", "memory")
# glibc's malloc returns each freed block over its threshold (128 KiB at start: every batch's
# activations) to the kernel, and the next step page-faults fresh zeroed pages in again. The
# threshold adapts, but only to the largest block the process has freed so far, so a recipe
# measured after a large-batch one inherits a higher threshold and looks faster (on the course's
# 2-core machine the documentation script went from about 11,000 to 15,000 images/s that way).
# Fixed thresholds make every measurement start alike and keep blocks up to 32 MiB for reuse, the
# role jemalloc or tcmalloc play in PyTorch's CPU performance tuning guide.
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 << 20, 64 << 20
MALLOC_TUNABLES = (
    f"glibc.malloc.mmap_threshold={MMAP_THRESHOLD}:glibc.malloc.trim_threshold={TRIM_THRESHOLD}"
)


@dataclass(frozen=True)
class Recipe:
    """How to train: every knob of the tuning steps, with the documentation script's defaults."""

    batch_size: int = 128
    num_workers: int = 0
    pin_memory: bool = False  # pinned host buffers, copied with non_blocking=True
    channels_last: bool = False  # model and inputs in NHWC memory format
    autocast: str | None = None  # "bf16" or "fp16": the forward pass under torch.autocast
    compile: bool = False  # torch.compile the model
    compile_mode: str | None = None  # "reduce-overhead": CUDA graphs (replay whole steps)
    loader: str = "dataloader"  # "memory": shuffled batches sliced from tensors on the device
    tf32: bool = False  # TF32 matmuls and convolutions (CUDA only)
    cudnn_benchmark: bool = False  # let cuDNN pick the fastest convolution algorithm (CUDA)
    lr: float = 0.05

    def __post_init__(self):
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size} must be >= 1; pass a positive size")
        if self.num_workers < 0:
            raise ValueError(
                f"num_workers={self.num_workers} must be >= 0 (0: load in the main process)"
            )
        if self.autocast not in (None, *AUTOCAST_DTYPES):
            raise ValueError(
                f"autocast={self.autocast!r} is not one of None, 'bf16', 'fp16'; pass one of those"
            )
        if self.loader not in LOADERS:
            raise ValueError(f"loader={self.loader!r} is not one of {LOADERS}; pass one of those")

    def changes(self, base: Recipe | None = None) -> dict:
        """The fields that differ from `base` (default: NAIVE), as {name: value}."""
        base = base or NAIVE
        return {k: v for k, v in vars(self).items() if getattr(base, k) != v}


NAIVE = Recipe()  # course_utils/train_cifar.py as written: batch 128, num_workers=0, no pinning


@dataclass(frozen=True)
class Step:
    """One tuning step: its name, the Recipe fields it sets, and what it needs to run."""

    name: str
    changes: dict = field(default_factory=dict)
    needs: str | None = None  # "cuda": skipped elsewhere
    why: str = ""

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
        *(Step(f"batch size {b}", {"batch_size": b},
               why="fewer, larger steps: less Python and launch overhead per image")
          for b in batch_sizes),
        Step(f"{cpus} DataLoader workers", {"num_workers": cpus},
             why="prepare batches in parallel with training (one per allocated CPU)"),
        Step("pinned memory, non_blocking", {"pin_memory": True}, needs="cuda",
             why="page-locked buffers: direct, asynchronous copies to the GPU"),
        Step("channels_last", {"channels_last": True},
             why="NHWC layout, what tensor-core and oneDNN convolutions prefer"),
        Step("autocast bf16 (with channels_last)", {"autocast": "bf16", "channels_last": True},
             why="bfloat16 matmuls and convolutions, float32 where precision matters; NHWC "
                 "too, as tensor cores and AMX want (bf16 in NCHW can be slower than fp32)"),
        Step("TF32 and cudnn.benchmark", {"tf32": True, "cudnn_benchmark": True}, needs="cuda",
             why="tensor-core float32 and the fastest convolution algorithm for these shapes"),
        Step("torch.compile", {"compile": True},
             why="fused kernels, less Python per step (compiles on the first steps)"),
        Step("CUDA graphs (compile mode reduce-overhead)",
             {"compile": True, "compile_mode": "reduce-overhead"}, needs="cuda",
             why="record the step's kernel launches once, replay them: no launch overhead per "
                 "kernel; needs static shapes and no host sync inside the step"),
        Step("batches from memory", {"loader": "memory", "num_workers": 0, "pin_memory": False},
             why="the whole data set as one tensor on the device: no per-image collate, no copy"),
    ]  # fmt: skip
    return [s for s in steps if compile or not s.changes.get("compile")]


def steady_allocator() -> bool:
    """Fix glibc malloc's thresholds for the rest of this process (MALLOC_TUNABLES' values).

    Call it before comparing recipes in one process: then no measurement gains from what an
    earlier one freed. It cannot be undone (glibc stops adapting once set), and a job gets the
    same from `export GLIBC_TUNABLES=<speed.MALLOC_TUNABLES>` in its script. Returns False where
    malloc is not glibc's (macOS, Alpine), which changes nothing.
    """
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL("libc.so.6")
    m_trim_threshold, m_mmap_threshold = -1, -3  # from glibc's malloc.h
    return bool(
        libc.mallopt(m_mmap_threshold, MMAP_THRESHOLD)
        and libc.mallopt(m_trim_threshold, TRIM_THRESHOLD)
    )


class MemoryLoader:
    """Shuffled batches sliced from a data set held as two tensors on `device`.

    What an external loader (DALI, FFCV) or a GPU-resident data set buys: no per-image
    __getitem__, no collate, no host-to-device copy per batch. Needs the data set to fit in
    device memory (CIFAR-10: 50,000 x 3 x 32 x 32 float32 = 614 MB). Drops the last partial batch.
    """

    def __init__(self, dataset, batch_size: int, device="cpu", seed: int = 0):
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be at least 1")
        self.inputs, self.targets = _as_tensors(dataset)
        self.inputs, self.targets = self.inputs.to(device), self.targets.to(device)
        if batch_size > len(self.targets):
            raise ValueError(
                f"batch_size={batch_size} is larger than the data set ({len(self.targets)} "
                "images); use a smaller batch"
            )
        self.batch_size = batch_size
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.targets) // self.batch_size

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = torch.randperm(len(self.targets), generator=self.generator)
        order = order.to(self.targets.device)
        for i in range(len(self)):
            index = order[i * self.batch_size : (i + 1) * self.batch_size]
            yield self.inputs[index], self.targets[index]


def _as_tensors(dataset) -> tuple[torch.Tensor, torch.Tensor]:
    """(images, labels) of a whole data set: its tensors if it has them, else stacked once."""
    if isinstance(getattr(dataset, "data", None), torch.Tensor):
        return dataset.data, torch.as_tensor(dataset.targets)
    images, labels = zip(*(dataset[i] for i in range(len(dataset))))
    return torch.stack(images), torch.as_tensor(labels)


def make_loader(recipe: Recipe, dataset, device, seed: int = 0):
    """The batches a Recipe trains on: a DataLoader, or a MemoryLoader on `device`."""
    device = torch.device(device)
    if recipe.loader == "memory":
        return MemoryLoader(dataset, recipe.batch_size, device, seed)
    return data.make_loader(
        dataset, recipe.batch_size, num_workers=recipe.num_workers,
        pin_memory=recipe.pin_memory and device.type == "cuda", seed=seed, drop_last=True,
    )  # fmt: skip


def build(recipe: Recipe, device, seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The lesson CNN and its optimizer, set up as the Recipe says (compiled if asked)."""
    device = torch.device(device)
    torch.manual_seed(seed)
    model = models.Net().to(device)
    if recipe.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=recipe.lr, momentum=0.9)
    if recipe.compile:
        model = torch.compile(model, mode=recipe.compile_mode)
    return model, optimizer


@contextlib.contextmanager
def backend_flags(recipe: Recipe):
    """TF32 and cudnn.benchmark as the Recipe says, all restored on exit.

    TF32 goes through `precision.fp32_precision(..., api="legacy")`: torch.compile reads the
    legacy getters, which raise once the newer fp32_precision attributes are set.
    """
    saved = torch.backends.cudnn.benchmark
    with contextlib.ExitStack() as stack:
        if recipe.tf32:
            stack.enter_context(precision.fp32_precision("tf32", api="legacy"))
        try:
            torch.backends.cudnn.benchmark = saved or recipe.cudnn_benchmark
            yield
        finally:
            torch.backends.cudnn.benchmark = saved


def train_steps(recipe: Recipe, model, optimizer, loader, device, steps: int | None) -> train.Stats:
    """Training steps of `model` on `loader` (at most `steps`) as the Recipe says; loss,
    accuracy and images/s."""
    device = torch.device(device)
    dtype = AUTOCAST_DTYPES.get(recipe.autocast)
    scaler = None
    if dtype is torch.float16 and device.type == "cuda":
        scaler = torch.amp.GradScaler("cuda")  # float16 gradients underflow without scaling
    with backend_flags(recipe):
        return train.train_one_epoch(
            model, loader, optimizer, device=device, progress=False, max_steps=steps,
            autocast_dtype=dtype, scaler=scaler, non_blocking=recipe.pin_memory,
            channels_last=recipe.channels_last,
        )  # fmt: skip


def _endless(loader) -> Iterator:
    """The loader's batches, epoch after epoch (a real run also pays each epoch's start)."""
    while True:
        yield from loader


def measure(
    recipe: Recipe,
    dataset,
    device="cpu",
    images: int = 4096,
    warmup: int = 2,
    seed: int = 0,
    blocks: int = 5,
) -> float:
    """Training images per second of `recipe` on `device`.

    `warmup` untimed steps first (compilation, worker start-up, cuDNN autotuning); then about
    `images` images in `blocks` timed blocks of steps (synchronized at each block's ends), and
    the median block's rate: a burst of other work on a shared machine spoils one block, not
    the figure.
    """
    if images < 1 or blocks < 1 or warmup < 0:
        raise ValueError(
            f"images={images} and blocks={blocks} must be >= 1 and warmup={warmup} >= 0"
        )
    device = torch.device(device)
    model, optimizer = build(recipe, device, seed)
    batches = _endless(make_loader(recipe, dataset, device, seed))
    if warmup:
        train_steps(recipe, model, optimizer, itertools.islice(batches, warmup), device, None)
    steps = max(1, images // recipe.batch_size)
    blocks = min(blocks, steps)
    rates = [
        train_steps(recipe, model, optimizer, itertools.islice(batches, steps // blocks),
                    device, None).images_per_second
        for _ in range(blocks)
    ]  # fmt: skip
    return statistics.median(rates)


@dataclass(frozen=True)
class StepResult:
    step: str
    images_per_second: float | None  # the candidate's rate; None: skipped on this device
    kept: bool
    note: str  # why it was kept, dropped or skipped
    best_per_second: float | None = None  # the best recipe's rate, measured beside the candidate

    @property
    def skipped(self) -> bool:
        return self.images_per_second is None


def tune(
    dataset,
    device="cpu",
    steps: list[Step] | None = None,
    start: Recipe = NAIVE,
    threshold: float = 0.03,
    pairs: int = 0,
    measure_fn: Callable[[Recipe], float] | None = None,
    **measure_kwargs,
) -> tuple[Recipe, list[StepResult]]:
    """Apply `steps` one at a time; keep a step when it is more than `threshold` (3%) faster than
    the best so far. Returns the tuned Recipe and one StepResult per step, starting with the
    baseline. `pairs` > 0: measure the best recipe and the candidate alternately, `pairs` times
    each, and compare the medians, so a change in the machine's load between steps is not taken
    for the step's effect (costs 2 x `pairs` measurements per step instead of 1). Each result
    carries both rates its verdict compares, so a table of them agrees with its verdicts.
    `measure_fn(recipe) -> images/s` replaces `measure` (tests pass a fake)."""
    device = torch.device(device)
    steps = tuning_steps() if steps is None else steps
    if measure_fn is None:

        def measure_fn(recipe):
            return measure(recipe, dataset, device, **measure_kwargs)

    best_rate = measure_fn(start)
    results = [StepResult("baseline (documentation script)", best_rate, True, "as written")]
    best = start
    for step in steps:
        if not step.applies_to(device):
            note = f"skipped here: needs {step.needs}, running on {device.type}"
            results.append(StepResult(step.name, None, False, note))
            continue
        candidate = replace(best, **step.changes)
        if pairs:
            best_rate, rate = _alternate(measure_fn, best, candidate, pairs)
        else:
            rate = measure_fn(candidate)
        kept = rate > best_rate * (1 + threshold)
        note = f"{rate / best_rate - 1:+.0%} vs best: " + ("kept" if kept else "dropped")
        results.append(StepResult(step.name, rate, kept, note, best_rate))
        if kept:
            best, best_rate = candidate, rate
    return best, results


def _alternate(measure_fn, a: Recipe, b: Recipe, repeats: int) -> tuple[float, float]:
    """Medians of `a` and `b` measured alternately, `repeats` times each."""
    rates_a, rates_b = [], []
    for _ in range(repeats):
        rates_a.append(measure_fn(a))
        rates_b.append(measure_fn(b))
    return statistics.median(rates_a), statistics.median(rates_b)


@dataclass(frozen=True)
class Comparison:
    naive: float  # median images/s
    tuned: float
    repeats: int

    @property
    def speedup(self) -> float:
        return self.tuned / self.naive


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

    return Comparison(*_alternate(measure_fn, naive, tuned, repeats), repeats)


def results_table(results: list[StepResult]) -> str:
    """The steps as a text table: each candidate's images/s, the best recipe's images/s measured
    beside it (the two numbers its verdict compares), and the verdict."""

    def rate(value):
        return "-" if value is None else f"{value:,.0f}"

    rows = [[r.step, rate(r.images_per_second), rate(r.best_per_second), r.note] for r in results]
    return text_table(["step", "images/s", "best, side by side", "verdict"], rows, right=[1, 2])


def line_report(profiler) -> str:
    """line_profiler's report, with the file named relative to the course folder (not the
    installation path) and times in milliseconds."""
    import io

    from course_utils.paths import REPO_ROOT

    text = io.StringIO()
    profiler.print_stats(stream=text, output_unit=1e-3)
    return text.getvalue().replace(f"{REPO_ROOT}/", "")


def time_loader(loader, batches: int) -> float:
    """Images per second of iterating `loader` alone (no model) for `batches` batches.

    Compare it with the training throughput: a loader that is not several times faster than
    training is (part of) the bottleneck.
    """
    if batches < 1:
        raise ValueError(f"batches={batches} must be at least 1")
    images, start = 0, time.perf_counter()
    for i, (_, targets) in enumerate(loader):
        images += len(targets)
        if i + 1 == batches:
            break
    return images / (time.perf_counter() - start)


def bottleneck(loader_rate: float, compute_rate: float, measured_rate: float) -> tuple[str, float]:
    """Which part limits a job ("loader" or "compute") and the most that overlapping them gains.

    With DataLoader workers, loading the next batch overlaps with computing this one, so a step
    takes as long as the slower part: the slower part's rate over the measured rate bounds the
    speed-up. Rates are images per second (exercise 08.2 asks the learner to write this).
    """
    for name, rate in (("loader_rate", loader_rate), ("compute_rate", compute_rate),
                       ("measured_rate", measured_rate)):  # fmt: skip
        if not rate > 0:
            raise ValueError(f"{name}={rate!r}: rates are images per second and must be > 0")
    limit = "loader" if loader_rate < compute_rate else "compute"
    return limit, min(loader_rate, compute_rate) / measured_rate


def documentation_loop(model, loader, optimizer, device="cpu", steps: int | None = None) -> int:
    """The training loop as the documentation writes it, one statement per line, so that
    line_profiler can attribute time to loading, forward, backward and the optimizer step.
    Returns the number of images trained on."""
    loss_fn, images = nn.CrossEntropyLoss(), 0
    for step, (inputs, targets) in enumerate(loader):
        inputs, targets = inputs.to(device), targets.to(device)
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        images += len(targets)
        if steps is not None and step + 1 >= steps:
            break
    return images


def profile_lines(fn, *args, **kwargs):
    """Run `fn(*args, **kwargs)` under line_profiler; return (profiler, {line: share of time}).

    The shares are of `fn`'s total time, keyed by the stripped source line. Needs the
    line_profiler package (ImportError with the install command otherwise).
    """
    try:
        from line_profiler import LineProfiler
    except ImportError as e:
        raise ImportError("line_profiler is not installed: pip install line_profiler") from e
    import inspect

    profiler = LineProfiler(fn)
    profiler.runcall(fn, *args, **kwargs)
    source, first = inspect.getsourcelines(fn)
    timings = next(iter(profiler.get_stats().timings.values()))
    total = sum(t for _, _, t in timings) or 1
    shares = {source[line - first].strip(): t / total for line, _, t in timings}
    return profiler, shares


def plot_steps(rows: list[dict], title: str):
    """Bar chart of images/s per tuning step (dicts with step, images_per_second, kept);
    skipped steps are left out. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    measured = [r for r in rows if r["images_per_second"] is not None][::-1]  # first on top
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.barh(
        [r["step"] for r in measured],
        [r["images_per_second"] for r in measured],
        color=["tab:green" if r["kept"] else "tab:gray" for r in measured],
    )
    ax.set_xlabel("training throughput (images/s)")
    ax.set_title(f"{title}\ngreen: kept, grey: dropped", fontsize=10)
    fig.tight_layout()
    return fig
