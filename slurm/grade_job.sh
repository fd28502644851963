#!/bin/bash
#SBATCH --job-name=grade
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --mem=16G
#SBATCH --time=01:00:00
#SBATCH --output=%x-%j.out
# Instructors: grade a folder of submissions on a compute node like the learners' (README,
# "Grading"), four notebooks at a time, two threads each. Each submission runs in a bubblewrap
# sandbox (no network, none of your files, limits on processes, memory, file size and CPU time;
# the node needs bubblewrap and user namespaces, else `course grade` refuses and says so); the
# job's cgroup bounds the whole job; per-notebook and per-cell time limits bound each submission
# (`course grade --help` shows their defaults). Options after SUBMISSIONS go to `course grade`
# (--timeout 900, --max-memory 16G, --no-sandbox, ...).
# Submit from the course folder: sbatch slurm/grade_job.sh SUBMISSIONS [--lesson 01] [--out DIR]
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate

srun -c "$SLURM_CPUS_PER_TASK" course grade -j "$((SLURM_CPUS_PER_TASK / 2))" "$@"
