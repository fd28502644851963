#!/bin/bash
#SBATCH --job-name=ddp-srun
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:2
#SBATCH --cpus-per-task=1
#SBATCH --mem=8G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# DDP with one task per GPU, started by srun: 2 nodes x 2 GPUs = 4 ranks (lesson 05).
# Each task reads its rank from SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS (course_utils.distributed);
# rank 0 listens on the first node, on a port derived from the job id.
# Submit from the course folder: sbatch slurm/ddp_srun.sh [options of course_utils.jobs.ddp_train]
# CPU variant (gloo, no GPU used): COURSE_DEVICE=cpu sbatch slurm/ddp_srun.sh
set -euo pipefail
# shellcheck source=slurm/config.sh
source "${SLURM_SUBMIT_DIR:-.}/slurm/config.sh"
course_activate
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK

srun python -m course_utils.jobs.ddp_train "${course_device_args[@]}" "$@"
