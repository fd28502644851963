"""Benchmarks anyone can rerun: each prints a table and saves its figures as JSON.

    python -m benchmarks.train_throughput --device auto   # naive vs tuned training loop
    python -m benchmarks.h2d_bandwidth                    # pageable vs pinned copies (GPU)
    python -m benchmarks.matmul                           # fp32, TF32, bf16 vs the device's peak
    python -m benchmarks.ddp_scaling                      # DDP, 1 vs 2 processes
    python -m benchmarks --device cuda --out-dir course_utils/reference   # all, as references

Every JSON file carries the device, PyTorch version and date it was measured with; ratios are
computed from figures measured side by side in the same run.
    __main__.py          `python -m benchmarks`: the four above, one after the other
    common.py            what every benchmark shares: --device and --out, the device decision,
                         the table, the file
    train_throughput.py  the documentation's training script against the tuned recipe
    h2d_bandwidth.py     host-to-device copies, pageable against pinned memory
    matmul.py            fp32, TF32 and bf16 matrix multiplication against the device's peak
    ddp_scaling.py       DistributedDataParallel with 1 and with 2 processes (torchrun)
    lab_cluster.py       lesson 10's lab on a Slurm cluster, recorded: what the lesson shows
                         where it runs without Slurm (course_utils/reference/lab_cluster.json)
"""
