#!/bin/bash
#SBATCH --job-name=jupyter
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --mem=8G
#SBATCH --time=02:00:00
#SBATCH --output=%x-%j.out
# JupyterLab on a compute node, reached through an SSH tunnel from your laptop. It listens on the
# node's localhost only and asks for a fresh token. Submit from the course folder:
#     sbatch slurm/jupyter_job.sh     then read jupyter-<jobid>.out for the tunnel command
# Stop it with `scancel <jobid>` when you are done: the job holds its GPU until then.
set -euo pipefail
# sbatch runs a copy of this script: find the course's slurm/config.sh from the job's record.
course_script=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')
# shellcheck source=slurm/config.sh
source "${COURSE_DIR:-$(dirname "${course_script:-$0}")/..}/slurm/config.sh"
course_activate
port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$(python -c 'import secrets; print(secrets.token_hex(24))')
root_flag=()
if [ "$(id -u)" = 0 ]; then root_flag=(--allow-root); fi  # containers and CI run as root
cat <<INFO
JupyterLab on node ${SLURMD_NODENAME:-$(hostname -s)}, port $port. On your laptop run
    ssh -N -L 8888:localhost:$port -J ${USER:-you}@<login node> ${USER:-you}@${SLURMD_NODENAME:-$(hostname -s)}
then open http://localhost:8888/lab?token=$token
TensorBoard (lesson 08): in a JupyterLab terminal run  tensorboard --logdir runs --port 6006
and add  -L 6006:localhost:6006  to the ssh command above; open http://localhost:6006
INFO

srun -c "$SLURM_CPUS_PER_TASK" jupyter lab --no-browser --ip=127.0.0.1 --port="$port" --ServerApp.port_retries=0 --IdentityProvider.token="$token" --ServerApp.root_dir="$COURSE_DIR/notebooks" "${root_flag[@]}"
