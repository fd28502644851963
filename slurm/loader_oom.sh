#!/bin/bash
#SBATCH --job-name=loader-oom
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --mem=1G
#SBATCH --time=00:05:00
#SBATCH --output=%x-%j.out
# Out of memory in a job (lesson 09): 4 DataLoader workers each read 256 MiB of images into
# memory of their own, in a job allowed 1 GiB. Past --mem the kernel's OOM killer ends a process
# of the step (SIGKILL: no Python error of its own), and Slurm says so in this job's output:
#     sbatch slurm/loader_oom.sh --open copy        each worker a copy: killed
#     sbatch slurm/loader_oom.sh --open mmap        the workers share the page cache: fits
#     sbatch slurm/loader_oom.sh --open copy --workers 1     fewer copies: fits
#     sbatch --mem=2G slurm/loader_oom.sh --open copy        a --mem that holds 4 copies
# The images are written to runs/09/ in the folder you submit from, on the first run.
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate

srun -c "$SLURM_CPUS_PER_TASK" "${course_task[@]}" python -m course_utils.jobs.loader_memory "$@"
