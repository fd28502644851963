"""Benchmarks anyone can rerun: each prints a table and saves its figures as JSON.

    python -m benchmarks.train_throughput --device auto   # naive vs tuned training loop
    python -m benchmarks.h2d_bandwidth                    # pageable vs pinned copies (GPU)
    python -m benchmarks.matmul                           # fp32, TF32, bf16 vs the device's peak
    python -m benchmarks.ddp_scaling                      # DDP, 1 vs 2 processes
    python -m benchmarks --device cuda --out-dir course_utils/reference   # all, as references

Every JSON file carries the device, PyTorch version and date it was measured with; ratios are
computed from figures measured side by side in the same run.
"""
