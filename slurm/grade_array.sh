#!/bin/bash
#SBATCH --job-name=course-grade
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --mem=16G
#SBATCH --time=01:00:00
# Instructors: one task of `course grade SUBMISSIONS --out OUT --slurm`'s job array (README,
# "Grading"). The command submits this script with --array, its manifest as the argument, and
# merges the tasks' results into one gradebook; you do not submit it yourself:
#     course grade submissions --out grading-out --slurm --tasks 8 --sbatch --partition=cpu
# which runs, with --array=0-7 and an output file per task added:
#     sbatch slurm/grade_array.sh OUT/slurm/run-*/manifest.json
# Each task grades its share of the submissions as `course grade` does on one node, in the
# bubblewrap sandbox with the same limits (the task probes its node first: without bubblewrap or
# user namespaces it fails with the reason and grades nothing), -j (default: its CPUs / 2)
# notebooks at a time. The header is the default of every task; --sbatch options override it.
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
# One task carries the array's own id, and scontrol lists every task for it: take the first.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n '0,/^ *Command=/s/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate

srun -c "$SLURM_CPUS_PER_TASK" python -m course_utils.grading.grader.task "$@"
