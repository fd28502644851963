#!/bin/bash
#SBATCH --job-name=cpu-train
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --mem=4G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# Train the lesson CNN on the CPUs of one node, one torch thread per allocated CPU (lesson 02).
# Submit from the course folder: sbatch slurm/cpu_job.sh [training options, e.g. --epochs 3]
set -euo pipefail
# shellcheck source=slurm/config.sh
source "${SLURM_SUBMIT_DIR:-.}/slurm/config.sh"
course_activate
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
# glibc's malloc keeps freed blocks up to 32 MiB for reuse instead of page-faulting every batch's
# memory in afresh (lesson 08, course_utils.speed.MALLOC_TUNABLES).
export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864"

srun python -m course_utils.jobs.train_cifar --disable-cuda --threads "$SLURM_CPUS_PER_TASK" --no-progress "$@"
