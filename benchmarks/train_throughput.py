"""Training throughput of the lesson CNN: the documentation's script (naive) against the tuned
recipe that `course_utils.speed.tune` finds on this device, one measured step at a time."""

from __future__ import annotations

import sys

import torch

from benchmarks import common
from course_utils import data, hpc, reference, speed, throughput

NAME = "train_throughput"
SECONDS = 0.2  # of steady training per measurement
BUDGET = 15.0  # seconds of pairs per verdict: a 2-core CPU run takes about 2-4 minutes


def run(
    device: torch.device,
    seconds: float = SECONDS,
    budget: float = BUDGET,
    compile: bool | None = None,
    batch_sizes=None,
    dataset_size: int | None = None,
    warmup: int = 2,
) -> dict:
    """Tune step by step, then measure naive and tuned in pairs; the labelled result. Each
    measurement trains a warm recipe for `seconds`; each verdict measures pairs for at most
    `budget` seconds. Defaults by device: a GPU gets larger batches and a CIFAR-sized data set."""
    gpu = device.type == "cuda"
    batch_sizes = batch_sizes or ((256, 512, 1024, 2048) if gpu else (256, 512, 1024))
    dataset_size = dataset_size or (50000 if gpu else 5000)
    if compile is None:  # compiling the training step takes minutes of a 2-core CPU
        compile = device.type == "cuda"
    dataset = data.SyntheticCIFAR10(train=True, size=dataset_size)
    steady = hpc.steady_allocator()  # no measurement gains from what an earlier one freed
    bench = throughput.Bench(dataset, device, seconds=seconds, warmup=warmup)
    steps = speed.tuning_steps(batch_sizes=tuple(batch_sizes), compile=compile)
    tuned, results = speed.tune(dataset, device, steps, bench=bench, budget=budget)
    end = speed.compare(throughput.NAIVE, tuned, bench=bench, budget=budget)
    bench.close()
    return {
        **reference.label(NAME, device),
        "settings": {
            "seconds_per_measurement": seconds,
            "budget_per_verdict": budget,
            "confidence": end.confidence,
            "min_gain": end.min_gain,
            "compile": compile,
            "warmup_steps": warmup,
            "batch_sizes": list(batch_sizes),
            "dataset": f"synthetic CIFAR-10, {dataset_size}",
            "steady_allocator": steady,
        },
        "tune_method": speed.TUNE_METHOD,
        "steps": [_step(r) for r in results],
        "naive_recipe": vars(throughput.NAIVE),
        "tuned_changes": tuned.changes(),
        "naive_images_per_second": end.baseline_median,
        "tuned_images_per_second": end.candidate_median,
        "speedup": end.ratio,
        "speedup_interval": [end.low, end.high],
        "speedup_pairs": end.pairs,
        "speedup_ratios": list(end.ratios),
        "speedup_verdict": end.words,
    }


def _step(r: speed.StepResult) -> dict:
    return {
        "step": r.step,
        "images_per_second": r.images_per_second,
        "kept": r.kept,
        "note": r.note,
        "best_per_second": r.best_per_second,
        "retried": r.retried,
        "ratios": list(r.ratios),
        "low": r.low,
        "high": r.high,
        "verdict": r.verdict,
    }


def main(argv=None) -> int:
    p = common.parser(NAME, __doc__)
    p.add_argument(
        "--seconds",
        type=float,
        default=SECONDS,
        help=f"seconds of training per measurement (default {SECONDS})",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=BUDGET,
        help=f"seconds of pairs per verdict before it is undecided (default {BUDGET})",
    )
    p.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=None,
        help="the batch sizes the batch-size steps try, in order "
        "(default: 256 512 1024, and 2048 on a GPU)",
    )
    p.add_argument(
        "--dataset-size",
        type=int,
        default=None,
        help="synthetic training images (default: 5000 CPU, 50000 GPU)",
    )
    p.add_argument(
        "--compile",
        choices=["auto", "yes", "no"],
        default="auto",
        help="include the torch.compile step (auto: on a GPU only)",
    )
    args = p.parse_args(argv)
    device = common.resolve_device(args.device, p)
    compile = {"auto": None, "yes": True, "no": False}[args.compile]
    result = run(device, args.seconds, args.budget, compile, args.batch_sizes, args.dataset_size)
    print(f"{result['device']}, PyTorch {result['torch']}, {result['date']}")
    print(speed.results_table([speed.StepResult(**step) for step in result["steps"]]))
    low, high = result["speedup_interval"]
    interval = "none yet" if low is None else f"{low:.2f}-{high:.2f}x"
    pairs = result["speedup_pairs"]
    print(
        f"naive against tuned, in pairs: {result['speedup']:.2f}x (99% interval {interval}, "
        f"{pairs} pair{'' if pairs == 1 else 's'}): {result['speedup_verdict']}; medians: naive "
        f"{result['naive_images_per_second']:,.0f} images/s, tuned "
        f"{result['tuned_images_per_second']:,.0f} images/s (tuned: {result['tuned_changes']})"
    )
    common.save(result, args.out, NAME, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
