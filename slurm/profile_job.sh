#!/bin/bash
#SBATCH --job-name=profile
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --mem=8G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# Profile a short training run with Nsight Systems (lesson 08): the timeline of CUDA kernels,
# copies and the CPU threads feeding them, in runs/profile-<jobid>.nsys-rep of the folder you
# submit from. Open the file in the Nsight Systems GUI on your laptop. The course's program, or
# yours:   sbatch slurm/profile_job.sh                 sbatch slurm/profile_job.sh train.py ...
# Watch the GPU while it runs, from a login node:
#     srun --jobid=<jobid> --overlap --pty gpustat -i 1     (or: nvidia-smi -l 1)
# nsys comes with the CUDA toolkit or a module (e.g. COURSE_MODULES="cuda nsight-systems").
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
command -v nsys >/dev/null || { echo "nsys not found: load your site's Nsight Systems module" >&2; exit 1; }
mkdir -p runs

course_program course_utils.jobs.train_cifar --max-steps 50 --no-progress -- "$@"

srun -c "$SLURM_CPUS_PER_TASK" nsys profile --trace=cuda,nvtx,osrt --sample=none --force-overwrite=true --output="runs/profile-${SLURM_JOB_ID}" python "${course_target[@]}"
