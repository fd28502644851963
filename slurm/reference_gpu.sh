#!/bin/bash
#SBATCH --job-name=reference-gpu
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --gres=gpu:1
#SBATCH --time=00:20:00
#SBATCH --output=%x-%j.out
# Record the GPU reference results that lessons 03 and 04 show (course_utils/reference/gpu.json).
# Submit from the course folder: sbatch slurm/reference_gpu.sh   then commit the JSON file.
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate

srun -c "$SLURM_CPUS_PER_TASK" python -m course_utils.jobs.reference_gpu "$@"
