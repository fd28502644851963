"""Run every benchmark; with --out-dir, write <out-dir>/bench_<name>.json (the lesson references).

python -m benchmarks --device cuda --out-dir course_utils/reference
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

NAMES = ("train_throughput", "h2d_bandwidth", "matmul", "ddp_scaling")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--out-dir", type=Path, default=None)
    p.add_argument("--only", nargs="+", choices=NAMES, default=list(NAMES))
    args = p.parse_args(argv)
    codes = {}
    for name in args.only:
        print(f"== {name}", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        extra = ["--out", str(args.out_dir / f"bench_{name}.json")] if args.out_dir else []
        codes[name] = module.main(["--device", args.device, *extra])
    skipped = [n for n, c in codes.items() if c == 2]
    if skipped:
        print(f"skipped (needs hardware this machine lacks): {', '.join(skipped)}")
    return max(codes.values())  # 2 when one was skipped: the run was not complete


if __name__ == "__main__":
    sys.exit(main())
