"""Lesson 10's lab on a Slurm cluster, recorded: what the lesson shows where it runs without Slurm.

    python -m benchmarks.lab_cluster --out course_utils/reference/lab_cluster.json

Run it where sbatch reaches a cluster (the course's CI cluster: .ci/slurm-cluster.sh start). It
runs the lab's steps with the same scripts a learner submits: the staging step (2 nodes x 2),
the scaling study (1, 2 and 4 ranks on one node, 2 nodes x 2), one job after the other, and the
sweep (a throttled array). --cpus-per-task overrides the scripts' 4: the CI cluster's two nodes
share one machine's cores, so its jobs run with as many CPUs as the local route's threads.
Run it with COURSE_DEVICE=cpu on a cluster without GPUs (its jobs then ask for none). The result
holds every record, each staging rank's result, the 2-node run's transport lines and Slurm's
accounting of every job (sacct's lines, from which lesson 10 computes seff's efficiencies),
labelled with the machine, date and the course's commit.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import shutil
import sys
import tempfile
from pathlib import Path

from course_utils import batch, paths, reference
from course_utils.lab import cluster, run_records, small_files, staging, transport

NAME = cluster.REFERENCE


def transport_lines(log: str) -> str:
    """The lines of a run's log that name its links and time its all-reduce."""
    keep = [
        line
        for line in log.splitlines()
        if transport.links(line) or transport.allreduce_results(line) or "NCCL INFO" in line
    ]
    return "\n".join(keep) + "\n"


def record(work: Path, cpus_per_task: int, lrs: list[float]) -> dict:
    launcher = batch.find_launcher()
    if launcher.kind != "slurm":
        raise SystemExit(f"no Slurm cluster to record: {launcher.why}")
    data, records = work / "data", work / "records"
    written = small_files.write_dataset(data)
    failed = []
    staged = cluster.stage_and_measure(launcher, data, work / "staging")
    runs = cluster.scaling(launcher, data, records, cpus_per_task=cpus_per_task)
    runs += cluster.sweep(launcher, data, records, lrs, cpus_per_task=cpus_per_task)
    failed = [r for r in [staged, *runs] if not r.ok]
    if failed:
        raise SystemExit(f"{failed[0].name} failed:\n{failed[0].tail(30)}")
    two_nodes = next(r for r in runs if r.name == "2x2")
    found = run_records.load(records)
    widest = next(r for r in found if r["name"] == "2x2")["label"]  # names both nodes
    return {
        "benchmark": NAME,
        "device": widest["machine"],
        "device_type": "cpu",
        "torch": widest["torch"],
        "date": datetime.date.today().isoformat(),
        "commit": paths.commit(),
        "launcher": "slurm",
        "settings": {
            "cpus_per_task": cpus_per_task,
            "images": written.files,
            "lrs": lrs,
            "jobs": "one after the other (the nodes share one machine's cores)",
        },
        "records": [r for r in found if r["study"] == "scaling"],
        "sweep": [r for r in found if r["study"] == "sweep"],
        "staging": staging.load_results(work / "staging"),
        "logs": {"2x2": transport_lines(two_nodes.output)},
        "accounting": {
            run.name: [dataclasses.asdict(step) for step in run.steps] for run in [staged, *runs]
        },
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{NAME}", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", type=Path, default=paths.REFERENCE_DIR / f"{NAME}.json")
    p.add_argument("--cpus-per-task", type=int, default=1)
    p.add_argument("--lrs", default="0.02,0.1,0.3")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="lab-cluster-", dir=Path.cwd()))
    try:
        result = record(work, args.cpus_per_task, [float(v) for v in args.lrs.split(",")])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    reference.save(result, args.out)
    print(reference.describe(result))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
