#!/usr/bin/env bash
# What the browser tests (tests/test_browser.py, marker `browser`) need, installed idempotently:
#   - Debian's chromium (Playwright drives it; `playwright install` cannot download its own here),
#   - the Playwright Python package in the course's .venv,
#   - a separate "centre" venv with JupyterHub + JupyterLab + jupyterlab_widgets (the centre's own
#     server environment; the course environment is only a registered kernel there) and
#     batchspawner (its SlurmSpawner starts a learner's server as a Slurm job:
#     tests/integration/test_hub_slurm.py),
#   - configurable-http-proxy from npm (JupyterHub's proxy).
# Usage: .ci/browser-setup.sh   (as root for apt; a second run installs nothing).
# The tests find the centre through COURSE_BROWSER_HOME (default below).
set -euo pipefail
cd "$(dirname "$0")/.."

# Exact pins. Debian keeps only the current chromium of its security channel, so it cannot be
# pinned; the installed version is printed instead.
PLAYWRIGHT=1.65.2
JUPYTERHUB=6.1.1
JUPYTERLAB=4.6.6
JUPYTERLAB_WIDGETS=3.0.17
CHP=5.3.0
BATCHSPAWNER=1.3.0
HOME_DIR=${COURSE_BROWSER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/course-browser}
CENTRE=$HOME_DIR/centre
STAMP="playwright=$PLAYWRIGHT jupyterhub=$JUPYTERHUB jupyterlab=$JUPYTERLAB widgets=$JUPYTERLAB_WIDGETS chp=$CHP batchspawner=$BATCHSPAWNER"

step() { local t=$SECONDS; "$@"; echo "browser-setup: $1 ... $((SECONDS - t)) s"; }

install_chromium() {
    [ -x /usr/bin/chromium ] && return
    # The package lists may be missing on a fresh machine.
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 ||
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
}

install_playwright() {
    make --no-print-directory setup >/dev/null
    [ "$(.venv/bin/python -c 'from importlib.metadata import version as v; print(v("playwright"))' 2>/dev/null)" = "$PLAYWRIGHT" ] && return
    .venv/bin/python -m pip install --quiet "playwright==$PLAYWRIGHT"
}

install_centre() {
    [ "$(cat "$HOME_DIR/stamp" 2>/dev/null)" = "$STAMP" ] && return
    # A changed pin is installed over the old one in place (pip replaces just that package), so a
    # hub that another checkout runs from this centre keeps going.
    [ -x "$CENTRE/bin/python" ] || python3 -m venv "$CENTRE"
    "$CENTRE/bin/python" -m pip install --quiet --no-compile "jupyterhub==$JUPYTERHUB" "jupyterlab==$JUPYTERLAB" \
        "jupyterlab_widgets==$JUPYTERLAB_WIDGETS" "batchspawner==$BATCHSPAWNER"
    npm install --silent --no-audit --no-fund --prefix "$HOME_DIR/node" "configurable-http-proxy@$CHP"
    echo "$STAMP" >"$HOME_DIR/stamp"
}

# Compute nodes have no internet: the centre's JupyterLab must neither fetch Jupyter news nor pop
# up to ask about it (as the course's own `make lab` does; the pop-up can cover what a test clicks).
quiet_news() {
    local settings=$CENTRE/share/jupyter/lab/settings
    mkdir -p "$settings"
    echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' \
        >"$settings/overrides.json"
}

mkdir -p "$HOME_DIR"
step install_chromium
step install_playwright
step install_centre
step quiet_news
echo "browser-setup: $(/usr/bin/chromium --version 2>/dev/null), $STAMP, in $HOME_DIR"
