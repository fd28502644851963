#!/bin/bash
#SBATCH --job-name=grade
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --mem=16G
#SBATCH --time=01:00:00
#SBATCH --output=%x-%j.out
# Instructors: grade a folder of submissions on a compute node like the learners' (README,
# "Grading"), four notebooks at a time, two threads each. The job's cgroup bounds memory and
# CPUs; per-notebook and per-cell time limits bound each submission. Add --gres=gpu:1 for lessons
# with GPU exercises.
# Submit from the course folder: sbatch slurm/grade_job.sh SUBMISSIONS [--lesson 01] [--out DIR]
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate

srun course grade "$@" -j "$((SLURM_CPUS_PER_TASK / 2))" --timeout 600 --cell-timeout 120
