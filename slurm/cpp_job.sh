#!/bin/bash
#SBATCH --job-name=cpp-deploy
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --mem=8G
#SBATCH --time=00:20:00
#SBATCH --output=%x-%j.out
# Lesson 07 on a node: export the CNN, compile it with AOTInductor for THIS node's device, build the
# C++ programs (cpp/, CMake against the venv's LibTorch, incremental in build/cpp), run, compare.
# Submit from the course folder: sbatch slurm/cpp_job.sh [--weights runs/07/net_weights.pt] [--batch 64]
# CPU variant (no GPU used): COURSE_DEVICE=cpu sbatch slurm/cpp_job.sh
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK

srun -c "$SLURM_CPUS_PER_TASK" python -m course_utils.jobs.cpp_demo --workdir "runs/07_cpp-${SLURM_JOB_ID}" "$@"
