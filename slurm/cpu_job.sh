#!/bin/bash
#SBATCH --job-name=cpu-train
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --mem=4G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# Train on the CPUs of one node, one torch thread per allocated CPU (lesson 02): the course's
# program (course_utils.jobs.train_cifar), or your own with its own options, run in the folder
# you submit from:
#     sbatch slurm/cpu_job.sh --epochs 3                 sbatch slurm/cpu_job.sh train.py --epochs 3
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
# glibc's malloc keeps freed blocks up to 32 MiB for reuse instead of page-faulting every batch's
# memory in afresh (lesson 08, course_utils.speed.MALLOC_TUNABLES).
export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864"

course_program course_utils.jobs.train_cifar --threads "$SLURM_CPUS_PER_TASK" --no-progress -- "$@"

srun -c "$SLURM_CPUS_PER_TASK" env CUDA_VISIBLE_DEVICES= python "${course_target[@]}"
