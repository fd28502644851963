#!/bin/bash
# An interactive shell on a compute node, for trying things by hand (not for sbatch):
#     slurm/interactive.sh                 # a login shell on a node with one GPU, for one hour
#     slurm/interactive.sh python -V       # or run one command there
# The account and partition come from slurm/config.sh; type `exit` to give the node back.
set -euo pipefail
# shellcheck source=slurm/config.sh
source "$(dirname "$0")/config.sh"
gpu=(--gres=gpu:1)
if course_cpu; then gpu=(); fi

exec srun --nodes=1 --ntasks=1 --cpus-per-task=4 "${gpu[@]}" --time=01:00:00 --pty "${@:-bash}"
