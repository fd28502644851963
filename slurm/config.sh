# shellcheck shell=bash
# Site settings for every script in slurm/: the one file to edit for your cluster.
# The scripts find it wherever you submit from (sbatch runs a copy of a script, so each asks
# Slurm where the original lies); your job runs in the folder you submitted from.
#     sbatch ~/pytorch-hpc-course/slurm/gpu_job.sh                 the course's program
#     sbatch ~/pytorch-hpc-course/slurm/ddp_srun.sh train.py --epochs 3    your own script
# #SBATCH lines cannot read variables; sbatch and srun read the account and partition from the
# environment, so source this file in your login shell too before you submit:
#     source slurm/config.sh && sbatch slurm/gpu_job.sh
# Every setting can also be given in the environment: COURSE_DEVICE=cpu sbatch slurm/ddp_srun.sh

# --- Submission: your project account and partition (empty: the cluster's defaults) ----------
COURSE_ACCOUNT=${COURSE_ACCOUNT:-}        # e.g. def-someprof
COURSE_PARTITION=${COURSE_PARTITION:-}    # e.g. gpu
if [ -n "$COURSE_ACCOUNT" ]; then export SBATCH_ACCOUNT=$COURSE_ACCOUNT SLURM_ACCOUNT=$COURSE_ACCOUNT; fi
if [ -n "$COURSE_PARTITION" ]; then export SBATCH_PARTITION=$COURSE_PARTITION SLURM_PARTITION=$COURSE_PARTITION; fi

# --- Software: modules and the Python environment ------------------------------------------
COURSE_MODULES=${COURSE_MODULES:-}        # e.g. "StdEnv/2023 python/3.11"; empty: no modules
COURSE_DIR=${COURSE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}  # this repository
COURSE_VENV=${COURSE_VENV:-$COURSE_DIR/.venv}         # the shared environment (`make setup`)
COURSE_WHEELHOUSE=${COURSE_WHEELHOUSE:-}  # site wheels for a virtualenv built inside a job
# Or the course's container image (lesson 00): each srun task (the srun lines that start
# "${course_task[@]}") runs inside it with its Python, and needs no environment above. A SquashFS
# file or a folder runs with Charliecloud's ch-run; a .sif file with Apptainer (`apptainer exec
# --nv`: the node's GPU driver comes in).
#     COURSE_IMAGE=~/course.sqfs sbatch slurm/ddp_srun.sh
COURSE_IMAGE=${COURSE_IMAGE:-}

# --- Device: COURSE_DEVICE=cpu runs a GPU script on CPUs only (gloo, no GPU touched) ---------
COURSE_DEVICE=${COURSE_DEVICE:-}
export COURSE_DEVICE

# Helpers the scripts call ---------------------------------------------------------------------
course_cpu() { [ "$COURSE_DEVICE" = cpu ]; }

# What each task is started with: srun sets CUDA_VISIBLE_DEVICES for every task from the job's
# GPUs, so a CPU run clears it in the task itself (your program needs no --disable-cuda flag).
# shellcheck disable=SC2034  # used by the scripts that source this file
course_task=()
if course_cpu; then
    # shellcheck disable=SC2034
    course_task=(env CUDA_VISIBLE_DEVICES=)
fi

# The program a job runs: the course's (the default) or yours, your options passed unchanged.
#     sbatch slurm/ddp_srun.sh --epochs 3              the course's program, with these options
#     sbatch slurm/ddp_srun.sh train.py --epochs 3     your script: a path to a .py file
#     sbatch slurm/ddp_srun.sh -m mypkg.train --lr 1   your module
# Usage in a script: course_program MODULE [DEFAULT_OPTION...] -- "$@"
# It sets course_target, what follows `python` (or `torchrun ...`) on the srun line. The default
# options go to the course's program only. Yours starts through course_utils.jobs.your_program,
# which gives it both common styles of rank variables (RANK, LOCAL_RANK, WORLD_SIZE,
# LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS to
# match them under torchrun) and lets torchvision load the course's synthetic CIFAR-10 stand-in.
course_program() {
    local module=$1 defaults=()
    shift
    while [ "$1" != -- ]; do defaults+=("$1"); shift; done
    shift
    if [ "${1:-}" = -m ] && [ -z "${2:-}" ]; then
        echo "course_program: -m needs a module name, e.g. -m mypkg.train" >&2; return 2
    fi
    if [[ "${1:-}" == *.py ]] && [ ! -f "$1" ]; then
        echo "course_program: no file $1 in $PWD (a script path is taken from the folder you submitted from)" >&2; return 2
    fi
    # shellcheck disable=SC2034  # used by the scripts that source this file
    if [ "${1:-}" = -m ] || [[ "${1:-}" == *.py ]]; then
        course_target=(-m course_utils.jobs.your_program "$@")
    else
        course_target=(-m "$module" "${defaults[@]}" "$@")
    fi
}

# Rank 0's address and a port of this job for a job's own rendezvous (MASTER_ADDR/MASTER_PORT;
# the port from the job id, as course_utils.distributed.port_for_job computes it).
course_master() {
    MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    MASTER_PORT=$((20000 + SLURM_JOB_ID % 10000))
    export MASTER_ADDR MASTER_PORT
}

course_load_modules() {
    if [ -n "$COURSE_MODULES" ]; then
        # shellcheck disable=SC2086  # word splitting wanted: a list of modules
        module purge && module load $COURSE_MODULES
    fi
}

course_activate() {  # the shared environment, or the container image
    course_load_modules
    if [ -n "$COURSE_IMAGE" ]; then course_in_image; return; fi
    [ -f "$COURSE_VENV/bin/activate" ] || { echo "no Python environment at $COURSE_VENV: run make setup" >&2; return 1; }
    # shellcheck disable=SC1091
    source "$COURSE_VENV/bin/activate"
}

course_job_venv() {  # a virtualenv on the node's local disk, as the cluster documentation shows
    course_load_modules
    local env_dir=${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/course-env-${SLURM_JOB_ID:-$$}
    python3 -m venv "$env_dir"
    # shellcheck disable=SC1091
    source "$env_dir/bin/activate"
    if [ -n "$COURSE_WHEELHOUSE" ]; then  # install from the site's wheels; nodes have no internet
        pip install --quiet --no-index --find-links "$COURSE_WHEELHOUSE" -r "$COURSE_DIR/requirements.txt"
    else  # no wheelhouse: reuse the shared environment's packages through a .pth file
        "$COURSE_VENV/bin/python" -c 'import site; print("\n".join(site.getsitepackages()))' \
            >"$(python -c 'import site; print(site.getsitepackages()[0])')/course-shared.pth"
    fi
    export PYTHONPATH="$COURSE_DIR${PYTHONPATH:+:$PYTHONPATH}"  # course_utils from the checkout
    echo "job virtualenv: $env_dir ($(python -c 'import torch; print("torch", torch.__version__)'))"
}

# The runtime for COURSE_IMAGE, as course_utils.containers.choose_runtime decides.
course_image_runtime() {
    case $COURSE_IMAGE in
        *.sif) echo apptainer ;;
        *) if command -v ch-run >/dev/null; then echo charliecloud
           elif command -v apptainer >/dev/null; then echo apptainer
           else echo "no container runtime for $COURSE_IMAGE: neither ch-run nor apptainer is on PATH (load one with COURSE_MODULES)" >&2; return 1
           fi ;;
    esac
}

# Each task's command inside COURSE_IMAGE, the folder you submitted from bound at /mnt/1 and
# started in: the words of course_utils.containers.in_image (tests/integration/test_container.py
# holds the two equal).
course_in_image() {
    local runtime work=/mnt/1
    runtime=$(course_image_runtime) || return 1
    export USER=${USER:-$(id -un)}  # ch-run refuses to start without it
    case $runtime in
        charliecloud) course_task=(ch-run --home "--bind=$PWD:$work" "--cd=$work" "$COURSE_IMAGE" -- "${course_task[@]}") ;;
        apptainer) course_task=(apptainer exec --nv "--bind=$PWD:$work" "--pwd=$work" "$COURSE_IMAGE" "${course_task[@]}") ;;
    esac
    echo "each task runs inside $COURSE_IMAGE ($runtime)"
}
