#!/bin/bash
#SBATCH --job-name=gpu-train
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --mem=8G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# Train on one GPU, in a virtualenv built on the node's local disk for this job (lesson 02): the
# course's program (course_utils.jobs.train_cifar) or your own, run in the folder you submit from:
#     sbatch slurm/gpu_job.sh --epochs 3                 sbatch slurm/gpu_job.sh train.py --epochs 3
# CPU variant (no GPU used): COURSE_DEVICE=cpu sbatch slurm/gpu_job.sh
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_job_venv

course_program course_utils.jobs.train_cifar --no-progress -- "$@"

srun -c "$SLURM_CPUS_PER_TASK" "${course_task[@]}" python "${course_target[@]}"
