# The course's two commands: `make lab` and `make test`. Everything else here serves them.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8888
# The folder JupyterLab serves (the browser tests serve a temporary copy: make lab LAB_DIR=...).
LAB_DIR ?= notebooks
# A fresh token per start unless you set one: make lab TOKEN=...
TOKEN ?= $(shell $(PYTHON) -c 'import secrets; print(secrets.token_hex(16))' 2>/dev/null || date +%s%N)
# JupyterLab refuses to run as root without --allow-root (containers and CI run as root).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
KERNEL := $(VENV)/share/jupyter/kernels/course/kernel.json
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
NBVAL_OPTS := --nbval-current-env --nbval-cell-timeout=600 -o addopts=-ra
PYTEST := $(BIN)/python -m pytest

.PHONY: lab test setup kernel test-unit test-solutions test-notebooks release lint clean-venv

setup: $(VENV)/.installed $(KERNEL) $(LAB_SETTINGS)

# Reinstalls only when the pins or the package metadata change (idempotent).
$(VENV)/.installed: requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install --no-deps -e .
	@touch $@

$(KERNEL): $(VENV)/.installed
	$(BIN)/python -m ipykernel install --sys-prefix --name course --display-name "PyTorch on HPC (course)"

# Nodes have no internet: JupyterLab must neither fetch Jupyter news nor pop up to ask about it.
$(LAB_SETTINGS): $(VENV)/.installed
	@mkdir -p $(dir $@)
	echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $@

lab: setup
	@echo "Open http://127.0.0.1:$(PORT)/lab?token=$(TOKEN)  (Ctrl-C to stop)"
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(PORT) --ServerApp.port_retries=0 \
		--IdentityProvider.token=$(TOKEN) --ServerApp.root_dir=$(LAB_DIR) $(ROOT_FLAG)

test: setup lint
	$(BIN)/course release --check
	$(PYTEST) tests
	$(MAKE) test-solutions test-notebooks

test-unit: setup
	$(PYTEST) tests -m "not notebook and not slurm and not browser"

test-solutions: setup
	$(PYTEST) --nbval $(NBVAL_OPTS) --nbval-sanitize-with tests/sanitize.cfg solutions

test-notebooks: setup
	$(PYTEST) --nbval-lax $(NBVAL_OPTS) notebooks

release: setup
	$(BIN)/course release

PY_SOURCES := course_utils tests benchmarks conftest.py
lint: setup
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)

clean-venv:
	rm -rf $(VENV)

# --- GPU verification: `make test-gpu` on a GPU machine ----------------------------------------
# The GPU machine has Python 3.12 and PyTorch but no internet and no jupyter/nbval, so the test
# tools travel as wheels. 1) Where there is internet (any x86_64 Linux; add
# --platform manylinux2014_aarch64 to GPU_WHEEL_OPTS for an ARM node):  make gpu-wheels
# 2) Copy the repository with wheels/ to the GPU machine and run:  make test-gpu
# It records the benchmarks and lesson 03/04 references in course_utils/reference/*.json (device,
# PyTorch version, date: commit them, the lessons show them), runs the `gpu` tests, and runs every
# solution notebook under nbval-lax (their stored outputs were recorded on a CPU, so GPU cells
# differ; every cell must still run without error).
GPU_PYTHON ?= python3
GPU_VENV ?= .venv-gpu
WHEELS ?= wheels
GPU_WHEEL_OPTS ?= --python-version 3.12 --only-binary=:all:
GPU_TOOLS := nbval==0.11.0 nbclient==0.11.0 nbformat==5.11.1 ipykernel==7.4.0 ipywidgets==8.1.9 \
	line_profiler==5.1.0 psutil==7.2.2
GPU_RUN := PYTHONPATH=$(CURDIR) $(GPU_VENV)/bin/python

.PHONY: gpu-wheels test-gpu

gpu-wheels:
	python3 -m pip download $(GPU_WHEEL_OPTS) -d $(WHEELS) $(GPU_TOOLS)

# On top of the machine's own PyTorch (--system-site-packages); course_utils from this checkout.
$(GPU_VENV)/.installed:
	$(GPU_PYTHON) -m venv --system-site-packages $(GPU_VENV)
	$(GPU_VENV)/bin/python -m pip install --no-index --find-links $(WHEELS) $(GPU_TOOLS)
	@touch $@

test-gpu: $(GPU_VENV)/.installed
	$(GPU_RUN) -c 'import torch; assert torch.cuda.is_available(), "test-gpu needs a CUDA GPU"'
	$(GPU_RUN) -m benchmarks --device cuda --out-dir course_utils/reference
	$(GPU_RUN) -m course_utils.reference_gpu
	$(GPU_RUN) -m pytest -m gpu -o addopts=-ra tests
	$(GPU_RUN) -m pytest --nbval-lax $(NBVAL_OPTS) solutions
