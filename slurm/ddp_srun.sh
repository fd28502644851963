#!/bin/bash
#SBATCH --job-name=ddp-srun
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:2
#SBATCH --cpus-per-task=4
#SBATCH --mem=8G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# DDP with one task per GPU, started by srun: 2 nodes x 2 GPUs = 4 ranks (lesson 05). Each task
# reads its rank from SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS; rank 0 listens on the first node
# (MASTER_ADDR), on a port derived from the job id (MASTER_PORT). The course's program
# (course_utils.jobs.ddp_train), or yours, run in the folder you submit from and given both
# styles of rank variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and SLURM_*):
#     sbatch slurm/ddp_srun.sh --epochs 3                sbatch slurm/ddp_srun.sh train.py --epochs 3
# One failed rank ends the job at once (--kill-on-bad-exit) instead of leaving the others waiting.
# No --signal: this script traps nothing, and bash (like Python) ends at SIGUSR1 by default, so a
# warning would end the job early, without a checkpoint; slurm/checkpoint_requeue.sh pairs one
# with a trap and `srun ... & wait` (lesson 06).
# CPU variant (gloo, no GPU used): COURSE_DEVICE=cpu sbatch slurm/ddp_srun.sh
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
course_master
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
course_program course_utils.jobs.ddp_train -- "$@"

srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK" "${course_task[@]}" python "${course_target[@]}"
