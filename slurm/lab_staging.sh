#!/bin/bash
#SBATCH --job-name=lab-staging
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=1G
#SBATCH --time=00:05:00
#SBATCH --output=%x-%j.out
# Lesson 10's staging step (course_utils.jobs.lab_staging), on 2 nodes x 2 tasks: every task
# stages the data set, the first of each node unpacks the archive onto the node's own disk
# (SLURM_TMPDIR where the site sets it, else TMPDIR, else /tmp) and the other waits and uses that
# copy; then the first task of each node times reading the images as small files and as one
# archive, from the shared folder and from the local copy. Each task writes <out>/rank<R>.json:
#     sbatch slurm/lab_staging.sh --data runs/10/data --out runs/10/staging
# (the lesson passes --answer FILE: a module with your stage_dataset, which every task calls)
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record
# (the first Command=: an array task's record can list the other tasks too).
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p' | sed -n 1p)
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate

srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK" python -m course_utils.jobs.lab_staging "$@"
