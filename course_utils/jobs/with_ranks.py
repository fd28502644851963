"""Start your own program with both common styles of rank variables, under srun or torchrun.

    srun python -m course_utils.jobs.with_ranks train.py --epochs 3
    srun python -m course_utils.jobs.with_ranks -m mypkg.train --epochs 3
    torchrun --nnodes=2 ... -m course_utils.jobs.with_ranks train.py --epochs 3
    eval "$(python -m course_utils.jobs.with_ranks --print-master)"   # in a batch script

Training scripts find their rank in one of two ways: torchrun's variables (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, and MASTER_ADDR/MASTER_PORT for init_method="env://"), or Slurm's,
as the cluster documentation's examples do (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS). This
reads whichever launcher started the task (`course_utils.ranks.DistEnv`), sets the other style to
the same values, then replaces itself with `python PROGRAM ...`: the program runs unchanged under
either launcher, in the folder the job was submitted from. slurm/ddp_srun.sh, ddp_torchrun.sh and
mps_job.sh start a program of yours through it.
"""

from __future__ import annotations

import os
import shlex
import sys

from course_utils.ranks import DistEnv, job_master

USAGE = "usage: python -m course_utils.jobs.with_ranks (SCRIPT.py | -m MODULE) [ARGS...]"


def rank_variables(env: DistEnv) -> dict[str, str]:
    """Both styles' variables for the task `env` describes."""
    values = {
        "RANK": env.rank, "LOCAL_RANK": env.local_rank, "WORLD_SIZE": env.world_size,
        "LOCAL_WORLD_SIZE": env.local_world_size,
        "MASTER_ADDR": env.master_addr, "MASTER_PORT": env.master_port,
        "SLURM_PROCID": env.rank, "SLURM_LOCALID": env.local_rank, "SLURM_NTASKS": env.world_size,
        "SLURM_NTASKS_PER_NODE": env.local_world_size,
    }  # fmt: skip
    return {name: str(value) for name, value in values.items()}


def master_exports(environ=None) -> str:
    """Shell lines exporting MASTER_ADDR and MASTER_PORT for the job (for a batch script)."""
    addr, port = job_master(environ)
    return f"export MASTER_ADDR={shlex.quote(addr)} MASTER_PORT={port}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--print-master"]:
        print(master_exports())
        return 0
    if (
        not argv
        or (argv[0] == "-m" and len(argv) < 2)
        or argv[0].startswith("-")
        and argv[0] != "-m"
    ):
        print(USAGE, file=sys.stderr)
        return 2
    os.environ.update(rank_variables(DistEnv.from_environ()))
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, *argv])  # keeps the PID torchrun and srun watch


if __name__ == "__main__":
    sys.exit(main())
