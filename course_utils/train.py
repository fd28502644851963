"""Training and evaluation loops that report loss, accuracy and images per second (lesson 02;
lessons 04, 05, 06 and 08 train with them)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch
from torch import nn
from tqdm.auto import tqdm

from course_utils.device import synchronize
from course_utils.profiling import nvtx_range


@dataclass(frozen=True)
class Stats:
    loss: float  # mean loss per image
    accuracy: float  # fraction in [0, 1]
    images: int
    seconds: float

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else float("nan")

    def __str__(self) -> str:
        return (
            f"loss {self.loss:.4f}  accuracy {self.accuracy:.1%}  "
            f"{self.images_per_second:,.0f} images/s"
        )


def _autocast(device: torch.device, dtype: torch.dtype | None):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def _run(model, loader, device, step, desc, progress, max_steps, non_blocking, channels_last):
    total_loss, correct, images = 0.0, 0, 0
    synchronize(device)
    start = time.perf_counter()
    batches = tqdm(
        loader, desc=desc, leave=False, disable=not progress, total=_length(loader, max_steps)
    )
    mark = device.type == "cuda"  # NVTX ranges: named steps in an Nsight Systems timeline
    for i, (inputs, targets) in enumerate(batches):
        if max_steps is not None and i >= max_steps:
            break
        with nvtx_range(f"{desc} step {i}", mark):
            with nvtx_range("copy to device", mark):
                inputs = inputs.to(device, non_blocking=non_blocking)
                targets = targets.to(device, non_blocking=non_blocking)
            if channels_last:
                inputs = inputs.contiguous(memory_format=torch.channels_last)
            with nvtx_range("forward, backward, optimizer", mark):
                loss, outputs = step(inputs, targets)
        # .item() forces a device sync per batch; accumulate on the device instead.
        total_loss = total_loss + loss.detach() * targets.size(0)
        correct = correct + (outputs.argmax(1) == targets).sum()
        images += targets.size(0)
    synchronize(device)
    seconds = time.perf_counter() - start
    if images == 0:
        raise ValueError("the loader yielded no batches; check the dataset size and batch_size")
    return Stats(float(total_loss) / images, int(correct) / images, images, seconds)


def _length(loader, max_steps):
    try:
        n = len(loader)
    except TypeError:
        return max_steps
    return n if max_steps is None else min(n, max_steps)


def train_one_epoch(
    model: nn.Module,
    loader,
    optimizer: torch.optim.Optimizer,
    loss_fn=None,
    device: torch.device | str = "cpu",
    *,
    progress: bool = True,
    max_steps: int | None = None,
    autocast_dtype: torch.dtype | None = None,
    scaler=None,
    non_blocking: bool = False,
    channels_last: bool = False,
) -> Stats:
    """One pass over `loader`, updating `model`; returns loss, accuracy and images/s.

    `autocast_dtype` (e.g. torch.bfloat16) runs the forward pass under torch.autocast; `scaler`
    (a torch.amp.GradScaler) scales the loss for float16 training on a GPU.
    """
    device = torch.device(device)
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    model.train()

    def step(inputs, targets):
        optimizer.zero_grad(set_to_none=True)
        with _autocast(device, autocast_dtype):
            outputs = model(inputs)
            loss = loss_fn(outputs, targets)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss, outputs

    return _run(
        model, loader, device, step, "train", progress, max_steps, non_blocking, channels_last
    )


@torch.no_grad()
def evaluate(
    model: nn.Module,
    loader,
    loss_fn=None,
    device: torch.device | str = "cpu",
    *,
    progress: bool = True,
    max_steps: int | None = None,
    autocast_dtype: torch.dtype | None = None,
    channels_last: bool = False,
) -> Stats:
    """Loss, accuracy and images/s of `model` on `loader`, without updating it."""
    device = torch.device(device)
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    model.eval()

    def step(inputs, targets):
        with _autocast(device, autocast_dtype):
            outputs = model(inputs)
            return loss_fn(outputs.float(), targets), outputs

    return _run(model, loader, device, step, "eval", progress, max_steps, False, channels_last)


def fit(model, train_loader, test_loader, optimizer, epochs: int = 1, device="cpu", progress=True):
    """Train for `epochs` and evaluate after each; returns a list of (train, test) Stats."""
    history = []
    for epoch in range(epochs):
        train_stats = train_one_epoch(
            model, train_loader, optimizer, device=device, progress=progress
        )
        test_stats = evaluate(model, test_loader, device=device, progress=progress)
        print(f"epoch {epoch + 1}/{epochs}  train: {train_stats}  |  test: {test_stats}")
        history.append((train_stats, test_stats))
    return history
