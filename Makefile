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
NBVAL_OPTS := --nbval-current-env --nbval-cell-timeout=600 -o addopts=-ra
PYTEST := $(BIN)/python -m pytest

.PHONY: lab test setup kernel test-unit test-solutions test-notebooks release lint clean-venv

setup: $(VENV)/.installed $(KERNEL)

# Reinstalls only when the pins or the package metadata change (idempotent).
$(VENV)/.installed: requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install --no-deps -e .
	@touch $@

$(KERNEL): $(VENV)/.installed
	$(BIN)/python -m ipykernel install --sys-prefix --name course --display-name "PyTorch on HPC (course)"

lab: setup
	@echo "Open http://127.0.0.1:$(PORT)/lab?token=$(TOKEN)  (Ctrl-C to stop)"
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(PORT) --ServerApp.port_retries=0 \
		--IdentityProvider.token=$(TOKEN) --ServerApp.root_dir=$(LAB_DIR) $(ROOT_FLAG)

test: setup
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

lint: setup
	$(BIN)/ruff check course_utils tests
	$(BIN)/ruff format --check course_utils tests

clean-venv:
	rm -rf $(VENV)
