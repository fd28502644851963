#!/bin/bash
#SBATCH --job-name=jupyter
#SBATCH --nodes=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --mem=8G
#SBATCH --time=02:00:00
#SBATCH --output=%x-%j.out
# JupyterLab on a compute node, reached through an SSH tunnel from your laptop. It listens on the
# node's localhost only and asks for a fresh token. Submit from the course folder:
#     sbatch slurm/jupyter_job.sh     then read jupyter-<jobid>.out for the tunnel command
# Stop it with `scancel <jobid>` when you are done: the job holds its GPU until then.
#
# Where the server runs inside the job (both ways are how centres start it, both tested):
#   COURSE_JUPYTER_IN=step  (the default) a job step: srun starts one task holding the job's CPUs,
#                           as JupyterHub's batchspawner does;
#   COURSE_JUPYTER_IN=batch the batch script itself, as Open OnDemand's Jupyter app does, often
#                           with cores asked as tasks:
#     COURSE_JUPYTER_IN=batch sbatch --ntasks-per-node=4 --cpus-per-task=1 slurm/jupyter_job.sh
# The kernel lives inside the job either way and sees its SLURM_* variables. COURSE_LAB_DIR is the
# folder the server shows (default: the course's notebooks/; a hub would show a copy in your home).
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
node=${SLURMD_NODENAME:-$(hostname -s)}
cat <<INFO
JupyterLab on node $node, port $port. On your laptop run
    ssh -N -L 8888:localhost:$port -J ${USER:-you}@<login node> ${USER:-you}@$node
then open http://localhost:8888/lab?token=$token
TensorBoard (lesson 08): in a JupyterLab terminal run  tensorboard --logdir runs --port 6006
and add  -L 6006:localhost:6006  to the ssh command above; open http://localhost:6006
INFO

lab=(jupyter lab --no-browser --ip=127.0.0.1 --port="$port" --ServerApp.port_retries=0
    --IdentityProvider.token="$token" --ServerApp.root_dir="${COURSE_LAB_DIR:-$COURSE_DIR/notebooks}"
    "${root_flag[@]}")
case ${COURSE_JUPYTER_IN:-step} in
    batch) echo "server in the batch script: ${SLURM_NTASKS:-1} task(s) on this node"; exec "${lab[@]}" ;;
    step) ;;
    *) echo "COURSE_JUPYTER_IN=$COURSE_JUPYTER_IN: use step (an srun job step) or batch (the batch script itself)" >&2; exit 2 ;;
esac
# One task with the job's CPUs, even in a job asked with several tasks (-c explicitly: the srun of
# Slurm 22.05 to 23.02 does not pass the job's --cpus-per-task on).
srun --ntasks=1 -c "$SLURM_CPUS_PER_TASK" "${lab[@]}"
