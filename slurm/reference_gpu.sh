#!/bin/bash
# Record the GPU reference results of lessons 03 and 04 (course_utils/reference/gpu.json).
# Run from the repository root: sbatch slurm/reference_gpu.sh   then commit the JSON file.
#SBATCH --job-name=reference-gpu
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --gres=gpu:1
#SBATCH --time=00:20:00
# Site settings (partition, account, modules) live in slurm/config.sh when your site has one.
[ -f slurm/config.sh ] && source slurm/config.sh

srun python -m course_utils.reference_gpu "$@"
