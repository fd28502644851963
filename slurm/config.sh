# shellcheck shell=bash
# Site settings for every script in slurm/: the one file to edit for your cluster.
# Each script sources it inside the job, so submit from the course folder:
#     cd pytorch-hpc-course && sbatch slurm/gpu_job.sh
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
COURSE_DIR=${COURSE_DIR:-${SLURM_SUBMIT_DIR:-$PWD}}   # this repository
COURSE_VENV=${COURSE_VENV:-$COURSE_DIR/.venv}         # the shared environment (`make setup`)
COURSE_WHEELHOUSE=${COURSE_WHEELHOUSE:-}  # site wheels for a virtualenv built inside a job

# --- Device: COURSE_DEVICE=cpu runs the GPU scripts' CPU variant (gloo, no GPU used) ---------
COURSE_DEVICE=${COURSE_DEVICE:-}
export COURSE_DEVICE

# Helpers the scripts call ---------------------------------------------------------------------
course_cpu() { [ "$COURSE_DEVICE" = cpu ]; }

# Training options for the device: the CPU variant never touches a GPU, even if one is there.
# shellcheck disable=SC2034  # used by the scripts that source this file
course_device_args=()
if course_cpu; then
    # shellcheck disable=SC2034
    course_device_args=(--disable-cuda)
fi

course_load_modules() {
    if [ -n "$COURSE_MODULES" ]; then
        # shellcheck disable=SC2086  # word splitting wanted: a list of modules
        module purge && module load $COURSE_MODULES
    fi
}

course_activate() {  # the shared environment
    course_load_modules
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

cd "$COURSE_DIR" || return 1
