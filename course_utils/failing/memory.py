"""Out of memory: what a training step's peak holds, and two ways to lower it (lesson 09).

Backward needs what forward saved: every layer's activations for the whole batch, so the peak
grows with batch size x depth. Gradient accumulation runs the batch as micro-batches and adds
their gradients (one micro-batch's activations at a time); activation checkpointing
(torch.utils.checkpoint) keeps only each segment's input and recomputes the segment during
backward (more compute, less memory). Both give the big batch's gradients to float rounding.
`measure_cpu` measures each step's peak in a fresh process (the process's peak resident memory,
in course_utils.jobs.memory_peak); `measure_cuda` uses the CUDA allocator's peak.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential

from course_utils import processes

STEPS = ("big batch", "accumulation", "checkpointing")


@dataclass(frozen=True)
class StepShape:
    """The model and batch every measured step uses (small enough for a 2-core laptop)."""

    batch: int = 4096
    width: int = 128  # narrow and deep: activation memory grows, compute does not much
    depth: int = 16
    micro_batches: int = 4  # gradient accumulation
    segments: int = 4  # activation checkpointing


def deep_mlp(shape: StepShape, seed: int = 0, device="cpu") -> nn.Sequential:
    """depth x (Linear, ReLU): activations dominate its memory, as in most real models."""
    torch.manual_seed(seed)
    layers = []
    for _ in range(shape.depth):
        layers += [nn.Linear(shape.width, shape.width), nn.ReLU()]
    return nn.Sequential(*layers).to(device)


def batch(shape: StepShape, seed: int = 1, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape.batch, shape.width, generator=g)
    return x.to(device), torch.randn(shape.batch, shape.width, generator=g).to(device)


def big_batch_step(model, x, y, shape: StepShape) -> None:
    """One backward over the whole batch: every activation of every sample is held at once."""
    nn.functional.mse_loss(model(x), y).backward()


def accumulation_step(model, x, y, shape: StepShape) -> None:
    """The same gradients from micro-batches: each loss is a mean over its micro-batch, so it
    is weighted by its share of the batch before backward adds it to .grad."""
    for xs, ys in zip(x.chunk(shape.micro_batches), y.chunk(shape.micro_batches)):
        loss = nn.functional.mse_loss(model(xs), ys) * (len(xs) / len(x))
        loss.backward()


def checkpointed_step(model, x, y, shape: StepShape) -> None:
    """Keep only each segment's input; recompute the segment's activations in backward."""
    out = checkpoint_sequential(model, shape.segments, x, use_reentrant=False)
    nn.functional.mse_loss(out, y).backward()


STEP_FUNCTIONS = dict(zip(STEPS, (big_batch_step, accumulation_step, checkpointed_step)))


def gradients(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters()]


def max_relative_difference(grads: list[torch.Tensor], reference: list[torch.Tensor]) -> float:
    """max over tensors of max|g - r| / max|r|: 0 means identical, 1e-7 float32 rounding."""
    return max(
        ((g - r).abs().max() / r.abs().max().clamp_min(1e-30)).item()
        for g, r in zip(grads, reference)
    )


def measure_cpu(shape: StepShape = StepShape(), timeout: float = 120) -> dict[str, dict]:
    """Each step's peak memory on the CPU and its gradients' difference from the big batch.

    Runs course_utils.jobs.memory_peak: every step in a process of its own, forked before any
    tensor exists, so each starts from the same memory; the peak is that process's peak
    resident memory above what it held just before the step. Returns
    {step: {"peak_bytes": int, "max_rel_diff": float}}.
    """
    with tempfile.TemporaryDirectory(prefix="memory-peak-") as tmp:
        out = Path(tmp) / "result.json"
        args = [f"--{k.replace('_', '-')}={v}" for k, v in shape.__dict__.items()]
        # its forked children live in its session: a time-out ends them with it
        done = processes.run(
            [sys.executable, "-m", "course_utils.jobs.memory_peak", *args, "--out", out],
            timeout=timeout,
            env=_host_measurement_env(),
        )
        if not done.ok:
            raise RuntimeError(
                f"memory_peak failed ({done.describe()}):\n{done.stdout}{done.stderr}"
            )
        return json.loads(out.read_text())


def _host_measurement_env() -> dict:
    """One thread: the same work on any machine, no contention. No GPU: this measures host
    memory, and where a GPU is visible autograd starts a thread per device, which a forked child
    cannot inherit ("Unable to handle autograd's threading in combination with fork-based
    multiprocessing", seen on an H200)."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}


def measure_cuda(shape: StepShape = StepShape(), device="cuda") -> dict[str, dict]:
    """The same measurement on a GPU, from the CUDA caching allocator's peak
    (torch.cuda.max_memory_allocated above what was allocated before the step)."""
    results, reference = {}, None
    for name in STEPS:
        model, (x, y) = deep_mlp(shape, device=device), batch(shape, device=device)
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        STEP_FUNCTIONS[name](model, x, y, shape)
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        grads = [g.cpu() for g in gradients(model)]
        reference = reference or grads
        results[name] = {
            "peak_bytes": peak,
            "max_rel_diff": max_relative_difference(grads, reference),
        }
        del model, x, y
        torch.cuda.empty_cache()
    return results


def snapshot_summary(snapshot: dict, top: int = 3) -> list[str]:
    """Lines that say what a CUDA memory snapshot (torch.cuda.memory._snapshot()) holds: the
    reserved segments, the live blocks, and the largest ones with the Python line that made
    each (recorded when _record_memory_history was on)."""
    segments = snapshot.get("segments", [])
    reserved = sum(s["total_size"] for s in segments)
    live = [b for s in segments for b in s["blocks"] if b["state"] == "active_allocated"]
    lines = [
        f"{len(segments)} segments reserve {reserved / 2**20:.1f} MiB; {len(live)} live blocks "
        f"hold {sum(b['size'] for b in live) / 2**20:.1f} MiB"
    ]
    for block in sorted(live, key=lambda b: -b["size"])[:top]:
        python = [f for f in block.get("frames", []) if f["filename"].endswith(".py")]
        python = [f for f in python if "/torch/" not in f["filename"]] or python  # your line
        where = "an unrecorded place"
        if python:
            where = f"{Path(python[0]['filename']).name}:{python[0]['line']} {python[0]['name']}"
        lines.append(f"  {block['size'] / 2**20:7.1f} MiB from {where}")
    return lines
