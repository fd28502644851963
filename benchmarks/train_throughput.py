"""Training throughput of the lesson CNN: the documentation's script (naive) against the tuned
recipe that `course_utils.speed.tune` finds on this device, one measured step at a time."""

from __future__ import annotations

import sys

import torch

from benchmarks import common
from course_utils import data, hpc, reference, speed, throughput

NAME = "train_throughput"


def run(
    device: torch.device,
    images: int | None = None,
    repeats: int = 3,
    compile: bool | None = None,
    batch_sizes=None,
    dataset_size: int | None = None,
    warmup: int = 2,
    pairs: int = 3,
) -> dict:
    """Tune step by step, then measure naive and tuned side by side; the labelled result.
    Defaults by device: a GPU gets larger batches, more images and a CIFAR-sized data set."""
    gpu = device.type == "cuda"
    images = images or (65536 if gpu else 8192)  # about a second per measurement
    batch_sizes = batch_sizes or ((256, 512, 1024, 2048) if gpu else (256, 512, 1024))
    dataset_size = dataset_size or (50000 if gpu else 5000)
    if compile is None:  # compiling the training step takes minutes of a 2-core CPU
        compile = device.type == "cuda"
    dataset = data.SyntheticCIFAR10(train=True, size=dataset_size)
    steady = hpc.steady_allocator()  # no measurement gains from what an earlier one freed
    kwargs = {"images": images, "warmup": warmup}
    steps = speed.tuning_steps(batch_sizes=tuple(batch_sizes), compile=compile)
    tuned, results = speed.tune(dataset, device, steps, pairs=pairs, **kwargs)
    comparison = speed.compare(throughput.NAIVE, tuned, dataset, device, repeats=repeats, **kwargs)
    return {
        **reference.label(NAME, device),
        "settings": {
            "images_per_measurement": images,
            "repeats": repeats,
            "compile": compile,
            "warmup_steps": warmup,
            "pairs": pairs,
            "batch_sizes": list(batch_sizes),
            "dataset": f"synthetic CIFAR-10, {dataset_size}",
            "steady_allocator": steady,
        },
        "tune_method": speed.TUNE_METHOD,
        "steps": [
            {
                "step": r.step,
                "images_per_second": r.images_per_second,
                "kept": r.kept,
                "note": r.note,
                "best_per_second": r.best_per_second,
                "retried": r.retried,
                "spread": r.spread,
            }
            for r in results
        ],
        "naive_recipe": vars(throughput.NAIVE),
        "tuned_changes": tuned.changes(),
        "naive_images_per_second": comparison.naive,
        "tuned_images_per_second": comparison.tuned,
        "speedup": comparison.speedup,
        "speedup_spread": comparison.spread,
        "speedup_verdict": comparison.verdict,
    }


def main(argv=None) -> int:
    p = common.parser(NAME, __doc__)
    p.add_argument(
        "--images",
        type=int,
        default=None,
        help="images per measurement (default: 8192 on a CPU, 65536 on a GPU)",
    )
    p.add_argument("--repeats", type=int, default=3, help="naive/tuned alternations")
    p.add_argument(
        "--pairs",
        type=int,
        default=3,
        help="best/candidate alternations per tuning step (0: one measurement)",
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
    result = run(
        device,
        args.images,
        args.repeats,
        compile,
        args.batch_sizes,
        args.dataset_size,
        pairs=args.pairs,
    )
    print(f"{result['device']}, PyTorch {result['torch']}, {result['date']}")
    print(speed.results_table([speed.StepResult(**step) for step in result["steps"]]))
    print(
        f"side by side ({args.repeats} alternations, medians): naive "
        f"{result['naive_images_per_second']:,.0f} images/s, tuned "
        f"{result['tuned_images_per_second']:,.0f} images/s: {result['speedup']:.2f}x "
        f"(tuned: {result['tuned_changes']}; spread {result['speedup_spread']:.0%}: "
        f"{result['speedup_verdict']})"
    )
    common.save(result, args.out, NAME, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
