#!/bin/bash
#SBATCH --job-name=mps-train
#SBATCH --nodes=1
#SBATCH --ntasks=4
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=1
#SBATCH --mem=8G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# Four independent trainings share one GPU through NVIDIA MPS, which runs their kernels
# concurrently instead of time-slicing: worth it when one small model leaves the GPU mostly idle.
# Submit from the course folder: sbatch slurm/mps_job.sh [training options]
# CPU variant (no GPU, no MPS): COURSE_DEVICE=cpu sbatch slurm/mps_job.sh
set -euo pipefail
# shellcheck source=slurm/config.sh
source "${SLURM_SUBMIT_DIR:-.}/slurm/config.sh"
course_activate
if ! course_cpu; then  # an MPS control daemon private to this job, stopped when the job ends
    export CUDA_MPS_PIPE_DIRECTORY=${TMPDIR:-/tmp}/mps-pipe-$SLURM_JOB_ID
    export CUDA_MPS_LOG_DIRECTORY=${TMPDIR:-/tmp}/mps-log-$SLURM_JOB_ID
    nvidia-cuda-mps-control -d
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
fi

srun python -m course_utils.jobs.train_cifar --threads 1 --no-progress "${course_device_args[@]}" "$@"
