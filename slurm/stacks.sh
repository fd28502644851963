#!/bin/bash
#SBATCH --job-name=stacks
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --time=00:05:00
#SBATCH --output=%x-%j.out
# Where is a running job stuck? The Python stack of each of its ranks, on every node (lesson 09):
#     bash slurm/stacks.sh JOBID          from a login node: the stacks print here
#     sbatch slurm/stacks.sh JOBID        the same as a job of its own (in stacks-N.out)
# One task on each node of job JOBID, inside that job's allocation (srun --overlap --jobid), runs
# py-spy dump on every rank there (course_utils.jobs.stacks); lines read "[rank R on NODE] ...".
# Take it twice a minute apart: a rank whose stack has not moved is stuck there. py-spy needs
# permission to trace your processes; where it says "Permission denied" the site restricts
# ptrace (kernel.yama.ptrace_scope): ask your admins, or start the ranks under py-spy.
set -euo pipefail
job=${1:?usage: bash slurm/stacks.sh JOBID}
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
nodes=$(squeue -h -j "$job" -o %D)
# Under sbatch this job's own SLURM_ variables would tie srun to this job: attach as from a login node.
for name in "${!SLURM_@}"; do unset "$name"; done
[ -n "$nodes" ] || { echo "job $job is not running (squeue knows no such job)" >&2; exit 1; }

srun --overlap --jobid="$job" --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 python -m course_utils.jobs.stacks "$job"
