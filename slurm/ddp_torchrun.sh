#!/bin/bash
#SBATCH --job-name=ddp-torchrun
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:2
#SBATCH --cpus-per-task=2
#SBATCH --mem=8G
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
# DDP with one torchrun per node (srun starts them); each torchrun starts one process per GPU of
# its node, and the torchruns meet through a c10d rendezvous on the first node.
# Submit from the course folder: sbatch slurm/ddp_torchrun.sh [options of course_utils.jobs.ddp_train]
# CPU variant (gloo, no GPU used): COURSE_DEVICE=cpu sbatch slurm/ddp_torchrun.sh
set -euo pipefail
# shellcheck source=slurm/config.sh
source "${SLURM_SUBMIT_DIR:-.}/slurm/config.sh"
course_activate
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
port=$((20000 + SLURM_JOB_ID % 10000))  # per job, as course_utils.distributed.port_for_job
export OMP_NUM_THREADS=1
# At the very end, an agent may log "failed to shutdown the rendezvous ... RendezvousConnectionError"
# with a TCPStore traceback: the first node's agent, which hosts the rendezvous store, exited first
# (pytorch/pytorch#69197). With exit code 0 and every rank's checksum printed, the run is complete.

srun torchrun --nnodes="$SLURM_JOB_NUM_NODES" --nproc-per-node="${SLURM_GPUS_ON_NODE:-1}" --rdzv-backend=c10d --rdzv-endpoint="$head:$port" --rdzv-id="$SLURM_JOB_ID" -m course_utils.jobs.ddp_train "${course_device_args[@]}" "$@"
