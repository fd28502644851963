"""Run your own training program the way the course's scripts run theirs, under srun or torchrun.

    python -m course_utils.jobs.your_program train.py --epochs 3        # on a laptop
    srun python -m course_utils.jobs.your_program -m mypkg.train --lr 1
    torchrun --nnodes=2 ... -m course_utils.jobs.your_program train.py
    eval "$(python -m course_utils.jobs.your_program --print-master)"   # in a batch script

What it adds before your program starts, in the folder the job was submitted from:
- Both common styles of rank variables. Programs find their rank either in torchrun's variables
  (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, and MASTER_ADDR/MASTER_PORT for
  init_method="env://") or, as the cluster documentation's examples do, in Slurm's (SLURM_PROCID,
  SLURM_LOCALID, SLURM_NTASKS). Whichever launcher started the task (course_utils.ranks.DistEnv),
  the other style is set to the same values, so the program runs unchanged under either.
- torchvision's CIFAR10 accepts the course's synthetic stand-in (`course data synthetic`),
  checked against its own checksums (course_utils.synthetic).
The program then runs in this process (same PID, as srun and torchrun expect), as `python
PROGRAM ...` would run it. slurm/*.sh start every program of yours through it.
"""

from __future__ import annotations

import os
import runpy
import shlex
import sys
from pathlib import Path

from course_utils.ranks import DistEnv, job_master
from course_utils.synthetic import accept_standin_on_import

USAGE = "usage: python -m course_utils.jobs.your_program (SCRIPT.py | -m MODULE) [ARGS...]"


def rank_variables(env: DistEnv) -> dict[str, str]:
    """Both styles' variables for the task `env` describes."""
    values = {
        "RANK": env.rank,
        "LOCAL_RANK": env.local_rank,
        "WORLD_SIZE": env.world_size,
        "LOCAL_WORLD_SIZE": env.local_world_size,
        "MASTER_ADDR": env.master_addr,
        "MASTER_PORT": env.master_port,
        "SLURM_PROCID": env.rank,
        "SLURM_LOCALID": env.local_rank,
        "SLURM_NTASKS": env.world_size,
        "SLURM_NTASKS_PER_NODE": env.local_world_size,
    }
    return {name: str(value) for name, value in values.items()}


def master_exports(environ=None) -> str:
    """Shell lines exporting MASTER_ADDR and MASTER_PORT for the job (for a batch script)."""
    addr, port = job_master(environ)
    return f"export MASTER_ADDR={shlex.quote(addr)} MASTER_PORT={port}"


def run(argv: list[str]) -> None:
    """Run `SCRIPT.py ARGS` or `-m MODULE ARGS` as __main__, as the python command would."""
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        script = Path(argv[0])
        if not script.is_file():
            raise SystemExit(f"your_program: no file {script} in {Path.cwd()}")
        sys.argv = list(argv)
        sys.path.insert(0, str(script.resolve().parent))  # as `python script.py` does
        runpy.run_path(str(script), run_name="__main__")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--print-master"]:
        print(master_exports())
        return 0
    program = argv[:2] if argv[:1] == ["-m"] else argv[:1]
    if not program or program == ["-m"] or (program[0].startswith("-") and program[0] != "-m"):
        print(USAGE, file=sys.stderr)
        return 2
    os.environ.update(rank_variables(DistEnv.from_environ()))
    accept_standin_on_import()
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
