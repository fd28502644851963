#!/bin/bash
#SBATCH --job-name=lab-sweep
#SBATCH --array=0-2%2
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --gpus-per-node=1
#SBATCH --mem-per-cpu=1G
#SBATCH --time=00:10:00
#SBATCH --output=%x-%A_%a.out
# Lesson 10's sweep: one training per learning rate, as a job array. Task i (SLURM_ARRAY_TASK_ID)
# trains with the i-th value of --lrs and writes one record, as the scaling jobs do:
#     sbatch slurm/lab_sweep.sh --data runs/10/data --out runs/10/records --lrs 0.02,0.1,0.3
# --array=0-2%2 runs 3 tasks, at most 2 at a time (the %: a throttle, so a sweep of hundreds does
# not take the whole partition); for 8 values: sbatch --array=0-7%2 slurm/lab_sweep.sh ...
# Each task has its one GPU (--gpus-per-node=1 for the task's one rank). CPU variant: no GPU
# option at all (a cluster without GPUs may refuse even --gpus-per-node=0):
#     grep -v '^#SBATCH --gpus' slurm/lab_sweep.sh > runs/lab_sweep_cpu.sh
#     COURSE_DIR=$PWD COURSE_DEVICE=cpu sbatch runs/lab_sweep_cpu.sh --data ... --lrs ...
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record
# (the first Command=: an array task's record can list the other tasks too).
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p' | sed -n 1p)
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
course_master
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK

srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK" "${course_task[@]}" python -m course_utils.jobs.lab_train "$@"
