#!/bin/bash
#SBATCH --job-name=gpu-train
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --mem=8G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# Train the lesson CNN on one GPU, in a virtualenv built on the node's local disk for this job.
# Submit from the course folder: sbatch slurm/gpu_job.sh [training options]
# CPU variant (no GPU used): COURSE_DEVICE=cpu sbatch slurm/gpu_job.sh
set -euo pipefail
# shellcheck source=slurm/config.sh
source "${SLURM_SUBMIT_DIR:-.}/slurm/config.sh"
course_job_venv

srun python -m course_utils.jobs.train_cifar --num-workers "$((SLURM_CPUS_PER_TASK - 1))" --no-progress "${course_device_args[@]}" "$@"
