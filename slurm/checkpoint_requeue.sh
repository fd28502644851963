#!/bin/bash
#SBATCH --job-name=ckpt-requeue
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --mem=4G
#SBATCH --time=00:30:00
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.out
# Checkpoint, requeue, resume (lesson 06). 120 s before the time limit Slurm sends USR1 to this
# batch shell (B:); the trap forwards it to training, which saves a checkpoint, runs
# `scontrol requeue $SLURM_JOB_ID` and exits. The job starts again from the top with
# SLURM_RESTART_COUNT=1 and resumes from the newest checkpoint in CKPT_DIR (same job id, same
# folder); --open-mode=append keeps the first run's output in the same file.
# The course's program (course_utils.jobs.resumable_train), or yours, which must then save,
# requeue and exit itself on SIGUSR1 (lesson 06), run in the folder you submit from:
#     sbatch slurm/checkpoint_requeue.sh --epochs 3      sbatch slurm/checkpoint_requeue.sh train.py
# Try a preemption by hand: scancel --signal=USR1 --batch JOBID
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
CKPT_DIR=${CKPT_DIR:-runs/ckpt-requeue-$SLURM_JOB_ID}
echo "job $SLURM_JOB_ID start $(date +%T) restart ${SLURM_RESTART_COUNT:-0} on $(hostname)"

# Bash runs a trap only between commands, so training runs in the background and the shell waits:
# `wait` returns as soon as the signal arrives, the trap forwards it, and we wait again.
# shellcheck disable=SC2317  # called by the traps below
forward() {
    echo "batch script: got SIG$1, forwarding it to training"
    kill -s "$1" "$pid" 2>/dev/null || true
}
trap 'forward USR1' USR1
trap 'forward TERM' TERM

course_program course_utils.jobs.resumable_train --ckpt-dir "$CKPT_DIR" --threads "$SLURM_CPUS_PER_TASK" -- "$@"
srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK" python "${course_target[@]}" &
pid=$!
status=0
wait "$pid" || status=$?
while kill -0 "$pid" 2>/dev/null; do  # interrupted by a trapped signal: training is still saving
    status=0
    wait "$pid" || status=$?
done
echo "job $SLURM_JOB_ID: training exited with status $status"
exit "$status"
