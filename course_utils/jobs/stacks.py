"""Print the Python stack of every rank of a Slurm job that runs on this node (lesson 09).

    srun --overlap --jobid=JOBID --nodes=N --ntasks=N --ntasks-per-node=1 \\
        python -m course_utils.jobs.stacks JOBID

slurm/stacks.sh runs exactly that: one task on each node of the job, inside its allocation. A
rank is a Python process of that job (SLURM_JOB_ID in its environment) on this node
(SLURMD_NODENAME) with a rank (RANK from torchrun, else SLURM_PROCID from srun); torchrun's
agents are left out. Each line of a rank's py-spy dump is printed as "[rank R on NODE] ...",
so the nodes' output can interleave and still be read. Exit code 1 when no rank was found.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys

import psutil

from course_utils.distributed import print_line
from course_utils.failing import stacks


def job_ranks(job_id: str, node: str) -> dict[int, psutil.Process]:
    """rank -> process, for the ranks of job `job_id` on `node`."""
    found = {}
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            cmdline = p.info["cmdline"] or []
            if not cmdline or "python" not in os.path.basename(cmdline[0]):
                continue
            if any("torch.distributed.run" in a or "torchrun" in a for a in cmdline):
                continue  # torchrun's agent: it has the task's SLURM_PROCID, not a rank
            environ = p.environ()
            if environ.get("SLURM_JOB_ID") != job_id:
                continue
            if environ.get("SLURMD_NODENAME", node) != node:
                continue
            rank = stacks.rank_of(p)
            if rank is not None and p.pid != os.getpid():
                found[rank] = p
    return dict(sorted(found.items()))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m course_utils.jobs.stacks JOBID", file=sys.stderr)
        return 2
    job_id, node = argv[0], os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    ranks = job_ranks(job_id, node)
    if not ranks:
        print_line(f"no rank of job {job_id} runs on {node}")
        return 1
    for rank, process in ranks.items():
        try:
            dump = stacks.py_spy_dump(process.pid)
        except RuntimeError as e:
            dump = str(e)
        prefix = f"[rank {rank} on {node}] "
        print_line("\n".join(prefix + line for line in [f"pid {process.pid}", *dump.splitlines()]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
