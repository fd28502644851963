"""Training throughput of a Recipe: how the lesson CNN is trained, and its images per second.

Lesson 08's measuring harness. A `Recipe` says how the CNN is trained: batch size, DataLoader
workers, pinned memory, channels_last, autocast, torch.compile, and where batches come from.
`NAIVE` is the cluster documentation's script as written (course_utils/jobs/train_cifar.py
defaults). `measure` trains with a Recipe and returns the median images per second of timed
blocks; `time_loader` times a loader alone. `Warm` builds and warms up a Recipe once, then
times it as often as asked; `Bench` keeps the Recipes being compared warm, so that
`course_utils.speed` can measure two of them in pairs, back to back (`course_utils.paired`),
with nothing but steady training inside what is timed.
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from course_utils import data, models, precision, timing, train

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
LOADERS = ("dataloader", "memory")


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


NAIVE = Recipe()  # jobs/train_cifar.py as written: batch 128, num_workers=0, no pinning


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
        dataset,
        recipe.batch_size,
        num_workers=recipe.num_workers,
        pin_memory=recipe.pin_memory and device.type == "cuda",
        seed=seed,
        drop_last=True,
    )


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
            model,
            loader,
            optimizer,
            device=device,
            progress=False,
            max_steps=steps,
            autocast_dtype=dtype,
            scaler=scaler,
            non_blocking=recipe.pin_memory,
            channels_last=recipe.channels_last,
        )


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
        train_steps(
            recipe, model, optimizer, itertools.islice(batches, steps // blocks), device, None
        ).images_per_second
        for _ in range(blocks)
    ]
    return statistics.median(rates)


class Warm:
    """One Recipe built and warmed up once, then timed as often as asked.

    Building it pays every one-time cost, untimed: the model and optimizer (compiled if the
    Recipe says so), its batches (DataLoader workers started; they persist across epochs), and
    `warmup` training steps (compilation, the first batches, the allocator growing, cuDNN's
    autotuning); then one steady step, timed, says how long a step takes (afterwards the median
    step of the last blocks: a burst of other work during the build does not shrink every later
    block). `rate(seconds)` times one block of as many steady steps as fill `seconds`, between
    two readings of a clock that synchronizes the device (`timing.synchronizing_clock`), with
    no synchronization inside.
    Not torch.utils.benchmark's `blocked_autorange`: it spends an untimed call on every
    measurement to choose its block size, a whole second step when one step fills the
    measurement (a large batch on a CPU), and the step's duration is known here already.
    `build_seconds` says what the set-up cost.
    """

    def __init__(self, recipe: Recipe, dataset, device="cpu", warmup: int = 2, seed: int = 0):
        if warmup < 0:
            raise ValueError(f"warmup={warmup} must be >= 0 (untimed steps before timing)")
        start = time.perf_counter()
        self.recipe, self.device = recipe, torch.device(device)
        self.clock = timing.synchronizing_clock([self.device])
        self.model, self.optimizer = build(recipe, self.device, seed)
        self.batches = _endless(make_loader(recipe, dataset, self.device, seed))
        if warmup:
            self.train(warmup)
        self.recent = [self._timed(1)]  # seconds per step: a steady step, then each block's
        self.build_seconds = time.perf_counter() - start

    @property
    def step_seconds(self) -> float:
        return max(statistics.median(self.recent[-5:]), 1e-6)

    def train(self, steps: int) -> None:
        """`steps` training steps on the next batches (synchronized at both ends)."""
        batches = itertools.islice(self.batches, steps)
        train_steps(self.recipe, self.model, self.optimizer, batches, self.device, None)

    def _timed(self, steps: int) -> float:
        start = self.clock()
        self.train(steps)
        return self.clock() - start

    def rate(self, seconds: float = 0.25) -> float:
        """Images per second of steady training: one block of about `seconds` (one step at
        least)."""
        steps = max(1, round(seconds / self.step_seconds))
        elapsed = self._timed(steps)
        self.recent = [*self.recent[-4:], elapsed / steps]
        return steps * self.recipe.batch_size / elapsed


class Bench:
    """Images per second of Recipes, each built and warmed up once (`Warm`) and timed for
    `seconds` per call: `bench(recipe)`. It keeps the `keep` Recipes it measured last warm (a
    tuning compares the best with each candidate in turn: the best stays, the candidates
    before it go, and their DataLoader workers with them). `warm(recipe)` builds one ahead of
    a comparison and returns it (`build_seconds`: compilation included)."""

    def __init__(
        self, dataset, device="cpu", seconds: float = 0.25, warmup: int = 2, keep: int = 3
    ):
        if seconds <= 0 or keep < 2:
            raise ValueError(f"seconds={seconds} must be > 0 and keep={keep} >= 2")
        self.dataset, self.device, self.seconds = dataset, torch.device(device), seconds
        self.warmup, self.keep = warmup, keep
        self.running: OrderedDict[Recipe, Warm] = OrderedDict()

    def warm(self, recipe: Recipe) -> Warm:
        if recipe in self.running:
            self.running.move_to_end(recipe)
        else:
            while len(self.running) >= self.keep:
                self.running.popitem(last=False)  # the least recently measured
            self.running[recipe] = Warm(recipe, self.dataset, self.device, self.warmup)
        return self.running[recipe]

    def __call__(self, recipe: Recipe) -> float:
        return self.warm(recipe).rate(self.seconds)

    def close(self) -> None:
        """Let go of every warm Recipe (and its DataLoader workers)."""
        self.running.clear()


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
