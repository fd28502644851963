"""DistributedDataParallel scaling: the lesson CNN with 1 and with 2 processes (torchrun).

Weak scaling: each process keeps its batch size and thread count, so 2 processes do twice the
work per step. Scaling efficiency = throughput(2) / (2 x throughput(1)); 100% is perfect. On the
CPU both processes share the machine's cores (gloo); on a node with 2 GPUs each gets one (nccl).
"""

from __future__ import annotations

import re
import sys

import torch

from benchmarks import common
from course_utils import distributed, reference

NAME = "ddp_scaling"
THROUGHPUT = re.compile(r"throughput: ([\d,.]+) images/s with (\d+) processes")


def parse_throughput(output: str) -> float:
    """Images/s of the whole job from course_utils.jobs.ddp_train's output (its last epoch)."""
    found = THROUGHPUT.findall(output)
    if not found:
        tail = "\n".join(output.splitlines()[-5:])
        raise ValueError(f"no 'throughput: ... images/s' line in the training output:\n{tail}")
    return float(found[-1][0].replace(",", ""))


def train_rate(
    nproc: int,
    device: torch.device,
    images: int,
    batch_size: int,
    threads: int,
    epochs: int,
    timeout: float,
) -> float:
    args = [
        "--epochs",
        epochs,
        "--images",
        images * nproc,
        "--batch-size",
        batch_size,
        "--threads",
        threads,
    ]
    if device.type != "cuda":
        args.append("--disable-cuda")
    # One process needs no launcher (ddp_train then joins a process group of 1); the throughput
    # is measured inside the training, so the launcher's start-up is not in the figure.
    result = distributed.launch(
        "course_utils.jobs.ddp_train",
        *args,
        nproc=nproc,
        echo=False,
        timeout=timeout,
        torchrun=nproc > 1,
    )
    return parse_throughput(result.output)


def run(
    device: torch.device,
    images: int = 4096,
    batch_size: int = 64,
    threads: int = 1,
    epochs: int = 2,
    timeout: float = 300,
) -> dict:
    """Throughput with 1 and 2 processes, each training `images` images per epoch."""
    if device.type == "cuda" and torch.cuda.device_count() < 2:
        device = torch.device("cpu")  # 2 processes on 1 GPU would measure sharing, not scaling
    rates = {n: train_rate(n, device, images, batch_size, threads, epochs, timeout) for n in (1, 2)}
    return {
        **reference.label(NAME, device),
        "settings": {
            "images_per_process": images,
            "batch_size_per_process": batch_size,
            "threads_per_process": threads,
            "epochs": epochs,
            "measured": "last epoch",
        },
        "rows": [{"processes": n, "images/s": r, "per process": r / n} for n, r in rates.items()],
        "speedup": rates[2] / rates[1],
        "scaling_efficiency": rates[2] / (2 * rates[1]),
    }


def main(argv=None) -> int:
    p = common.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=4096, help="training images per process")
    p.add_argument("--batch-size", type=int, default=64, help="per process")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--epochs", type=int, default=2, help="the last one is measured")
    args = p.parse_args(argv)
    device = common.resolve_device(args.device, p)
    result = run(device, args.images, args.batch_size, args.threads, args.epochs)
    print(f"{result['device']}, PyTorch {result['torch']}, {result['date']}")
    print(common.table(result["rows"], list(result["rows"][0])))
    print(
        f"2 processes: {result['speedup']:.2f}x the throughput of 1, scaling efficiency "
        f"{result['scaling_efficiency']:.0%}"
    )
    common.save(result, args.out, NAME, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
