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
# ranks talk over gloo (course_utils.device's rule decides it).
#     sbatch slurm/mps_job.sh --epochs 3               DDP replicas (course_utils.jobs.ddp_train)
#     MPS_MODE=independent sbatch slurm/mps_job.sh     4 independent trainings, seeds 0..3
#     sbatch slurm/mps_job.sh train.py ...             your program, with rank variables
# The MPS server: centres that offer MPS run it themselves, started by a prolog for a job that
# asks for it, usually as Slurm's gres/mps (Slurm's gres.html, "MPS Management"): submit
#     sbatch --gres=mps:100 slurm/mps_job.sh ...       (the name and count: your centre's docs)
# and the job finds its server (Slurm sets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE). Without one, the
# ranks time-slice the GPU, and the job says so. Only where the centre lets users run their own
# (a node or GPU of your own; check first) does MPS_OWN=1 start a daemon private to the job.
# CPU variant (no GPU, no MPS): COURSE_DEVICE=cpu sbatch slurm/mps_job.sh
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
course_master
if course_cpu; then
    :
elif [ -n "${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-}" ]; then
    echo "MPS: the centre's server for this job (gres/mps, ${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE}% of the GPU)"
elif [ "${MPS_OWN:-0}" = 1 ]; then  # a control daemon private to this job, stopped at its end
    export CUDA_MPS_PIPE_DIRECTORY=${TMPDIR:-/tmp}/mps-pipe-$SLURM_JOB_ID
    export CUDA_MPS_LOG_DIRECTORY=${TMPDIR:-/tmp}/mps-log-$SLURM_JOB_ID
    nvidia-cuda-mps-control -d
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
else
    echo "MPS: no server for this job (no gres/mps): the ranks time-slice the GPU; ask for --gres=mps:N where the centre offers it"
fi
if [ "${MPS_MODE:-ddp}" = independent ]; then  # train_cifar offsets --seed by the task number
    course_program course_utils.jobs.train_cifar --threads 1 --no-progress -- "$@"
else
    course_program course_utils.jobs.ddp_train --threads 1 -- "$@"
fi

srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK" "${course_task[@]}" python "${course_target[@]}"
