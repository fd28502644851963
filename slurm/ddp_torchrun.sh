#!/bin/bash
#SBATCH --job-name=ddp-torchrun
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:2
#SBATCH --cpus-per-task=8
#SBATCH --mem=8G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# DDP with one torchrun per node (srun starts them); each torchrun starts one process per GPU of
# its node, and the torchruns meet through a c10d rendezvous on the first node. The course's
# program (course_utils.jobs.ddp_train), or yours, run in the folder you submit from; yours also
# finds its rank in SLURM_PROCID/SLURM_LOCALID, set to torchrun's RANK/LOCAL_RANK:
#     sbatch slurm/ddp_torchrun.sh --epochs 3            sbatch slurm/ddp_torchrun.sh train.py
# CPU variant (gloo, no GPU used): COURSE_DEVICE=cpu sbatch slurm/ddp_torchrun.sh
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
course_master
export OMP_NUM_THREADS=1
course_program course_utils.jobs.ddp_train -- "$@"
# At the very end, an agent may log "failed to shutdown the rendezvous ... RendezvousConnectionError"
# with a TCPStore traceback: the first node's agent, which hosts the rendezvous store, exited first
# (pytorch/pytorch#69197). With exit code 0 and every rank's checksum printed, the run is complete.

srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK" "${course_task[@]}" torchrun --nnodes="$SLURM_JOB_NUM_NODES" --nproc-per-node="${SLURM_GPUS_ON_NODE:-1}" --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id="$SLURM_JOB_ID" "${course_target[@]}"
