#!/bin/bash
#SBATCH --job-name=mps-train
#SBATCH --nodes=1
#SBATCH --ntasks=4
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=1
#SBATCH --mem=8G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# Several replicas of a small model on ONE GPU, as the cluster documentation's "single GPU data
# parallelism" does (lesson 05): a model that leaves a GPU mostly idle gets 4 DDP ranks on it,
# run concurrently by NVIDIA MPS instead of time-sliced. NCCL refuses two ranks on one GPU, so the
# ranks talk over gloo (course_utils.distributed.choose_backend decides it).
#     sbatch slurm/mps_job.sh --epochs 3               DDP replicas (course_utils.jobs.ddp_train)
#     MPS_MODE=independent sbatch slurm/mps_job.sh     4 independent trainings, seeds 0..3
#     sbatch slurm/mps_job.sh train.py ...             your program, with rank variables
# CPU variant (no GPU, no MPS): COURSE_DEVICE=cpu sbatch slurm/mps_job.sh
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
course_master
if ! course_cpu; then  # an MPS control daemon private to this job, stopped when the job ends
    export CUDA_MPS_PIPE_DIRECTORY=${TMPDIR:-/tmp}/mps-pipe-$SLURM_JOB_ID
    export CUDA_MPS_LOG_DIRECTORY=${TMPDIR:-/tmp}/mps-log-$SLURM_JOB_ID
    nvidia-cuda-mps-control -d
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
fi
if [ "${MPS_MODE:-ddp}" = independent ]; then  # train_cifar offsets --seed by the task number
    course_program course_utils.jobs.train_cifar --threads 1 --no-progress -- "$@"
else
    course_program course_utils.jobs.ddp_train --threads 1 -- "$@"
fi

srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK" "${course_task[@]}" python "${course_target[@]}"
