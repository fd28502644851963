#!/bin/bash
#SBATCH --job-name=lab-scaling
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --gpus-per-node=1
#SBATCH --mem-per-cpu=1G
#SBATCH --time=00:10:00
#SBATCH --output=%x-%j.out
# Lesson 10's scaling study: the same training (course_utils.jobs.lab_train) at 1, 2 and 4 ranks
# on one node and at 2 nodes x 2, one job per size, a GPU per task; sbatch's own options override
# the header:
#     for shape in "1 1" "1 2" "1 4" "2 2"; do    # nodes, and tasks (= GPUs) per node
#         read -r nodes per <<<"$shape"
#         sbatch -N"$nodes" -n$((nodes * per)) --ntasks-per-node="$per" --gpus-per-node="$per" \
#             slurm/lab_scaling.sh --data runs/10/data --out runs/10/records
#     done
# (the lesson's notebook submits the same set with your own script: course_utils.lab.cluster). Each
# node stages the data set on its own disk once (SLURM_TMPDIR, else TMPDIR, else /tmp) and the
# ranks train on that copy; rank 0 writes one JSON record. srun is given the CPUs per task
# explicitly (some Slurm releases, 22.05 to 23.02, do not pass the job's --cpus-per-task on to
# srun). GPUs: --gpus-per-node=N with N tasks per node, so that every task sees its node's GPUs
# and each rank takes cuda:LOCAL_RANK. Not --gpus-per-task alone: it binds each task to its own
# GPU, and where Slurm confines devices (ConstrainDevices=yes, usual at GPU centres) the tasks
# cannot reach each other's GPUs over CUDA IPC, so NCCL fails within a node. (--gpus-per-task
# works with srun --gpu-bind=none, or srun --gres-flags=allow-task-sharing from Slurm 23.11.)
# NCCL_DEBUG=INFO makes NCCL name its transport in the log (INIT and NET lines only).
# One run at the header's size (1 node, 1 task): sbatch slurm/lab_scaling.sh --data ... --out ...
# CPU variant: no GPU option at all (a cluster without GPUs may refuse even --gpus-per-node=0):
#     grep -v '^#SBATCH --gpus' slurm/lab_scaling.sh > runs/lab_scaling_cpu.sh
#     COURSE_DIR=$PWD COURSE_DEVICE=cpu sbatch -N1 -n2 runs/lab_scaling_cpu.sh --data ... --out ...
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record
# (the first Command=: an array task's record can list the other tasks too).
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p' | sed -n 1p)
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
course_master
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
export NCCL_DEBUG=${NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET}

srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK" "${course_task[@]}" python -m course_utils.jobs.lab_train "$@"
