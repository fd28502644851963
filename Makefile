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
# The kernel watch (a notebook whose kernel dies fails that cell at once) is loaded by the root
# conftest.py, as in every pytest run in the repository.
NBVAL_OPTS := --nbval-current-env --nbval-cell-timeout=600 -o addopts=-ra
SANITIZE := course_utils/grading/sanitize.cfg
PYTEST := $(BIN)/python -m pytest

# The test lanes (each also gets the OpenMP setting below).
TEST_LANES := test test-short test-solutions test-notebooks test-unit test-integration test-long \
	test-long-waiting test-long-busy test-in-job test-torch-min test-torch-min-unit \
	test-torch-min-notebooks test-torch-min-jobs test-torch-min-unit-then-jobs test-container \
	test-container-unit test-container-runs
.PHONY: lab setup kernel programs release lint clean-venv clean-torch-min setup-torch-min-packages \
	setup-torch-min $(TEST_LANES)

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

# Lesson 07's C++ programs (build/cpp) and the lesson CNN compiled with AOTInductor, built once
# before the tests and the lessons run: cold, they took most of a fresh clone's lesson 07 (the
# programs' three compiles, and AOTInductor's first compile, which leaves its kernels in
# build/inductor-cache for every later compile of the same network). The demo that does it is
# the lesson's batch job (jobs/cpp_demo.py), so it also shows that C++ and Python agree here;
# its package is the checks' own model (seed 0), which they then reuse. What the lesson has the
# learner build (the documentation's example, their own program) stays the lesson's, in its own
# folder; where ccache is installed, the documentation's example is compiled once here too
# (build/runs/07/example), and the lesson's first compile of it (19 s of a fresh clone's 54 s
# lesson) and AOTInductor's compile of the package's wrapper (5 s) find theirs in build/ccache
# (course_utils/ccache.py says how). Where cmake
# or a C++ compiler is missing it says so, and the lesson builds them when it can. Built again
# when the C++ sources or the packages change, or when another PyTorch's lane reconfigured
# build/cpp (its CMakeCache.txt is then newer).
BUILD_DIR := $(or $(COURSE_BUILD_DIR),build)
PROGRAMS_STAMP := $(BUILD_DIR)/.programs-built
CPP_SOURCES := $(wildcard cpp/*.cpp cpp/*.h cpp/CMakeLists.txt cpp/cmake/*.cmake)

programs: setup
	@if command -v cmake >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(PROGRAMS_STAMP); \
	else \
		echo "lesson 07's C++ programs not built: no cmake or c++ here (install cmake and a C++20 compiler)"; \
	fi

$(PROGRAMS_STAMP): $(VENV)/.installed $(CPP_SOURCES) $(wildcard $(BUILD_DIR)/cpp/CMakeCache.txt)
	$(BIN)/python -c 'from course_utils import cpp; print(cpp.build_programs()); print(cpp.warm_lesson_example())'
	$(BIN)/python -m course_utils.jobs.cpp_demo --workdir $(BUILD_DIR)/cpp-demo
	@touch $@

lab: setup
	@echo "Open http://127.0.0.1:$(PORT)/lab?token=$(TOKEN)  (Ctrl-C to stop)"
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(PORT) --ServerApp.port_retries=0 \
		--IdentityProvider.token=$(TOKEN) --ServerApp.root_dir=$(LAB_DIR) $(ROOT_FLAG)

# The test lanes run several PyTorch processes at once on purpose (make test's two halves, the
# long lane's two, the 2.6 lane's), each with an OpenMP team sized to the machine. GNU OpenMP's
# idle threads spin a while before they sleep, burning a core another process waits for; with
# PASSIVE they sleep at once. Three solution notebooks under nbval beside tests/grading/checks,
# on 2 cores: 76.7 s by default, 57.3 s with PASSIVE (PyTorch 2.14; on 2.6, 69.6 s and 73.1 s
# against 54.9 s and 52.6 s). The fast lane alone gains nothing, and a whole `make test` showed
# no gain beyond run-to-run noise. `make lab` and the lessons keep OpenMP's default.
$(TEST_LANES): export OMP_WAIT_POLICY = PASSIVE

# The long suites: the tests that need a Slurm cluster or a browser, and the slow ones (lesson 07
# graded with cold C++ builds, `make lab` served). `make test-long` runs them, and CI runs it after
# `make test`. Without Slurm or a browser those skip.
LONG_MARKERS := slurm or browser or slow

# The tests and the solutions run side by side: each keeps about one of the two cores busy
# (pytest waits on the processes its tests start, nbval on a kernel's cells), so together they
# take little more than the longer of the two. Builds they share take turns (cpp.build_project
# locks its folder). Each one's output is printed whole when it ends (-O).
test: setup programs lint
	$(BIN)/course release --check
	$(MAKE) --no-print-directory -j2 -Otarget test-short test-solutions

# All of tests/ but the long suites and the tests that need the course's image (test-container).
test-short: setup programs
	$(PYTEST) tests -m "not ($(LONG_MARKERS) or container)"

# In two halves side by side, as `make test` runs its two: the tests that wait on a Slurm
# scheduler (they share the cluster's two nodes, so they take turns among themselves), and the
# others (sandbox gradings, cold builds and the browser tests that need no Slurm). Where the
# browser tests go balances the halves: with the Slurm half they made it 1266 s against the
# other's 800 s, side by side on 2 cores, since the class graded on Slurm's record grew to 14
# submissions. Together the halves are LONG_MARKERS.
WAITING_MARKERS := slurm
test-long: setup
	$(MAKE) --no-print-directory -j2 -Otarget test-long-waiting test-long-busy

test-long-waiting: setup
	$(PYTEST) tests -m "($(WAITING_MARKERS)) and not container"

test-long-busy: setup
	$(PYTEST) tests -m "($(LONG_MARKERS)) and not ($(WAITING_MARKERS) or container)"

# The fast lane: tests that start no process (tests/integration holds the ones that do).
test-unit: setup
	$(PYTEST) tests --ignore=tests/integration

test-integration: setup
	$(PYTEST) tests/integration

# Lesson 10 submits real jobs where a Slurm controller answers; the notebook lanes run its local
# route (one process per rank on this machine): the CI cluster's two nodes share 2 cores, and the
# Slurm route has tests of its own (tests/integration/test_lab_slurm.py).
LAB_LOCAL := COURSE_LAUNCHER=local

# Every check goes through a judge, as in `course grade` (grading/judge/plugin.py): the solutions
# must earn every point, held-out cases included; the student versions none.
JUDGE_PASS := -p course_utils.grading.judge.plugin --course-judge=pass
JUDGE_NONE := -p course_utils.grading.judge.plugin --course-judge=none

test-solutions: setup programs
	$(LAB_LOCAL) $(PYTEST) --nbval $(NBVAL_OPTS) --nbval-sanitize-with $(SANITIZE) $(JUDGE_PASS) \
		solutions

# The student versions under nbval-lax (CI runs them on PyTorch 2.6: make test-torch-min).
test-notebooks: setup programs
	$(LAB_LOCAL) $(PYTEST) --nbval-lax $(NBVAL_OPTS) $(JUDGE_NONE) notebooks

# The lessons whose cells launch processes (torchrun, Lightning, forked ranks, jobs): the in-job
# lane runs these (10 on its local route, as the notebook lanes do). IN_JOB_NOTEBOOKS="notebooks/*.ipynb" runs them all.
LAUNCHING_LESSONS := 05 06 09 10
IN_JOB_NOTEBOOKS ?= $(wildcard $(foreach n,$(LAUNCHING_LESSONS),notebooks/$(n)_*.ipynb))
# The three ways centres start a server (an srun step; the batch script, cores as tasks or as
# CPUs). The lessons are dealt to them in turn, each lesson run once (IN_JOB_EVERY=--every-style
# runs every lesson in every style: three times as long).
IN_JOB_STYLES ?= step batch-tasks batch-cpus
IN_JOB_EVERY ?=
# The Python whose pytest and kernel run in the jobs: the pinned one, or the low end's
# (test-torch-min-jobs, which CI runs: these lessons on PyTorch 2.6 once, inside jobs).
IN_JOB_PYTHON ?= $(BIN)/python
# The student notebooks of the in-job lane's lessons, and all the others.
OTHER_NOTEBOOKS = $(filter-out $(IN_JOB_NOTEBOOKS),$(wildcard notebooks/*.ipynb))

# The lessons with their kernel inside a Slurm job, started as centres start a learner's server:
# an srun step (batchspawner), the batch script with cores as tasks (Open OnDemand), the batch
# script with cores as CPUs. Needs a cluster (.ci/slurm-cluster.sh start); one table at the end.
test-in-job: setup
	$(LAB_LOCAL) $(IN_JOB_PYTHON) tests/integration/lessons_in_job.py --styles "$(IN_JOB_STYLES)" $(IN_JOB_EVERY) -- \
		--nbval-lax $(NBVAL_OPTS) $(IN_JOB_NOTEBOOKS)

release: setup
	$(BIN)/course release

# --- The low end of the PyTorch range the course declares (pyproject.toml: torch>=2.6) -----------
# A second environment beside the pinned one: the course's other pins with the oldest PyTorch it
# supports and that release's torchvision (torch 2.N pairs with torchvision 0.(N+15); a test holds
# these two to that rule). It runs the fast lane and every lesson under nbval-lax there.
TORCH_MIN := 2.6.0
TORCHVISION_MIN := 0.21.0
MIN_VENV ?= .venv-torch2.6
MIN_BIN := $(MIN_VENV)/bin

MIN_REQUIREMENTS := $(MIN_VENV)/.requirements-torch$(TORCH_MIN)-torchvision$(TORCHVISION_MIN)
MIN_STAMP := $(MIN_VENV)/.installed-torch$(TORCH_MIN)-torchvision$(TORCHVISION_MIN)

# Reinstalls only when the pins, the package metadata or these two versions change (idempotent).
# Two steps: the pinned packages, then the course itself. Only the second writes in the checkout
# (pip install -e . writes course_utils.egg-info here), so the first may run beside `make setup`
# (CI does: setup-torch-min-packages) and the second must not.
$(MIN_REQUIREMENTS): requirements.txt
	@test -x $(MIN_BIN)/python || $(PYTHON) -m venv $(MIN_VENV)
	$(MIN_BIN)/python -m pip install --quiet --upgrade pip
	sed -e 's/^torch==.*/torch==$(TORCH_MIN)/' -e 's/^torchvision==.*/torchvision==$(TORCHVISION_MIN)/' \
		requirements.txt > $(MIN_VENV)/requirements.txt
	$(MIN_BIN)/python -m pip install -r $(MIN_VENV)/requirements.txt
	@touch $@

$(MIN_STAMP): $(MIN_REQUIREMENTS) pyproject.toml
	$(MIN_BIN)/python -m pip install --no-deps -e .
	@touch $@

# The PyTorch 2.6 environment away (about 6 GB): CI, once its lane is done, before the image.
clean-torch-min:
	rm -rf $(MIN_VENV)

# The pinned packages alone (mostly downloads), and the whole environment.
setup-torch-min-packages: $(MIN_REQUIREMENTS)
setup-torch-min: $(MIN_STAMP)

# Which PyTorch and torchvision the 2.6 lanes run, printed first in their logs.
MIN_VERSIONS = $(MIN_BIN)/python -c 'import torch, torchvision; \
	print("torch", torch.__version__, "torchvision", torchvision.__version__)'

# The student notebooks it runs: all of them, or test-torch-min-jobs' share.
TORCH_MIN_NOTEBOOKS ?= notebooks

# The fast lane and the notebooks side by side, one core each (as make test runs its two).
test-torch-min: $(MIN_STAMP)
	$(MIN_VERSIONS)
	$(MAKE) --no-print-directory -j2 -Otarget test-torch-min-unit test-torch-min-notebooks

test-torch-min-unit: $(MIN_STAMP)
	$(MIN_BIN)/python -m pytest tests --ignore=tests/integration

test-torch-min-notebooks: $(MIN_STAMP)
	$(LAB_LOCAL) $(MIN_BIN)/python -m pytest --nbval-lax $(NBVAL_OPTS) $(JUDGE_NONE) $(TORCH_MIN_NOTEBOOKS)

# CI's low end, each student notebook once on PyTorch 2.6: the fast lane and the lessons that
# launch no process here, the lessons that do with their kernel inside Slurm jobs (test-in-job).
# The notebooks here take longer than the fast lane and the in-job lessons one after the other,
# so those two run beside them.
test-torch-min-jobs: $(MIN_STAMP)
	$(MIN_VERSIONS)
	$(MAKE) --no-print-directory -j2 -Otarget test-torch-min-notebooks test-torch-min-unit-then-jobs \
		TORCH_MIN_NOTEBOOKS="$(OTHER_NOTEBOOKS)"

test-torch-min-unit-then-jobs: $(MIN_STAMP)
	$(MAKE) --no-print-directory test-torch-min-unit
	$(MAKE) --no-print-directory test-in-job IN_JOB_PYTHON=$(MIN_BIN)/python

PY_SOURCES := course_utils tests benchmarks conftest.py
lint: setup
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)

clean-venv:
	rm -rf $(VENV)

# --- GPU verification: `make test-gpu` on a GPU node ---------------------------------------------
# A GPU node has its own Python and PyTorch (often `python3` is itself a virtual environment, so a
# venv on top of it would lose its PyTorch) and often no internet. The test tools travel as wheels
# and are installed beside it with `pip --target`, found through PYTHONPATH:
#   1) where there is internet (any x86_64 Linux; add --platform manylinux2014_aarch64 to
#      GPU_WHEEL_OPTS for an ARM node):   make gpu-wheels
#   2) copy the checkout with wheels/ to the GPU node and run:   make test-gpu
# It runs course_utils.tooling.gpu_report: the benchmarks and lesson references (written to
# course_utils/reference/*.json, labelled with device, PyTorch, date and COURSE_COMMIT: commit
# them; the lessons show them), the `gpu` tests, and every solution notebook under nbval-lax,
# then one table: step, passed or failed, seconds. Any PyTorch from 2.6 on (the pin is not needed).
GPU_PYTHON ?= python3
GPU_SITE ?= .gpu-site
WHEELS ?= wheels
GPU_WHEEL_OPTS ?= --python-version 3.12 --only-binary=:all:
GPU_TOOLS := nbval==0.11.0 nbclient==0.11.0 nbformat==5.11.1 ipykernel==7.4.0 ipywidgets==8.1.9 \
	line_profiler==5.1.0 psutil==7.2.2 py-spy==0.4.2
# Where the copy has no .git, pass the commit it was made from: make test-gpu COURSE_COMMIT=abc1234
COURSE_COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null)
GPU_RUN := COURSE_COMMIT=$(COURSE_COMMIT) PYTHONPATH=$(CURDIR)/$(GPU_SITE):$(CURDIR) $(GPU_PYTHON)

.PHONY: gpu-wheels test-gpu

gpu-wheels:
	python3 -m pip download $(GPU_WHEEL_OPTS) -d $(WHEELS) $(GPU_TOOLS)

# Without wheels/ the node's Python must have the tools already.
$(GPU_SITE)/.installed:
	@mkdir -p $(GPU_SITE)
	@if ls $(WHEELS)/*.whl >/dev/null 2>&1; then \
		$(GPU_PYTHON) -m pip install --quiet --no-index --no-deps --target $(GPU_SITE) $(WHEELS)/*.whl; \
	elif ! $(GPU_PYTHON) -c 'import nbval, nbclient, ipykernel' 2>/dev/null; then \
		echo "no test tools here: run make gpu-wheels where there is internet, copy wheels/" >&2; \
		exit 1; \
	fi
	@touch $@

# GPU_REPORT_OPTS: e.g. "--steps gpu-tests,lessons --budget 600" for a GPU job with a time limit.
GPU_REPORT_OPTS ?=
test-gpu: $(GPU_SITE)/.installed
	$(GPU_RUN) -m course_utils.tooling.gpu_report $(GPU_REPORT_OPTS)

# --- The site: `make site` builds the lessons as a static site in site/_build/html ---------------
# From the committed notebooks, executing nothing (course_utils/tooling/site.py writes the sources,
# Sphinx + myst-nb render them). Its packages (site/requirements.txt) and MathJax (npm) are
# installed once, behind stamps; after that the build needs no network. View it with
# `python -m http.server -d site/_build/html`; any static host serves it.
SITE_BUILD := site/_build
SITE_STAMP := $(VENV)/.installed-site
MATHJAX_VERSION := 3.2.2
MATHJAX := $(SITE_BUILD)/npm/node_modules/mathjax/es5

.PHONY: site

$(SITE_STAMP): site/requirements.txt $(VENV)/.installed
	$(BIN)/python -m pip install -r site/requirements.txt
	@touch $@

$(MATHJAX)/tex-chtml.js:
	npm install --silent --no-audit --no-fund --prefix $(SITE_BUILD)/npm mathjax@$(MATHJAX_VERSION)
	@touch $@

site: $(SITE_STAMP) $(MATHJAX)/tex-chtml.js
	$(BIN)/python -m course_utils.tooling.site --out $(SITE_BUILD)/src --mathjax $(MATHJAX)
	$(BIN)/sphinx-build -q -W --keep-going -c site -d $(SITE_BUILD)/doctrees \
		$(SITE_BUILD)/src $(SITE_BUILD)/html

# --- The course in a container: `make container` (README, "On a cluster"; lesson 00) ------------
# container/build.sh builds the image without a registry, as root (mmdebstrap, squashfs-tools):
# Debian 12 from Debian's archive, the lock's wheels fetched by this machine's pip, the course in
# /opt/course. It writes build/container/course.sqfs and packages.txt, the list of the packages it
# holds (printed too), once it has checked the folder has the room. Each run builds the image
# afresh and keeps the wheels. CONTAINER=DIR builds it elsewhere (a disk with more room).
# The lock is requirements.txt resolved for the image's Python (Debian 12's 3.11.2): run
# `make container-lock` after changing requirements.txt (tests/test_container_files.py checks).
CONTAINER := build/container
.PHONY: container container-lock

container:
	PYTHON=$(PYTHON) container/build.sh build $(CONTAINER)

container-lock:
	PYTHON=$(PYTHON) container/build.sh lock

# CI's container lane: the image, then side by side the fast lane with the image's Python and
# the tests that run the image (tests/integration/test_container.py: the doctor, lesson 01 under
# nbval, the container kernel, lesson 05's DDP on two nodes, the package list again). Needs
# Charliecloud (ch-run) and, for the DDP job, the Slurm cluster. Where the image is built,
# test-container-unit and test-container-runs run alone. Measured on 2 cores shared with other
# work: 3.1 minutes with the downloads kept at a load average of about 3 (image 128 s, then the
# two halves 52 s and 48 s side by side), 8.5 minutes at 4 to 7; a cold build took 3 to 6 minutes.
IMAGE := $(CONTAINER)/course.sqfs
# This checkout at /mnt/1 (ch-run binds only onto paths the image has), started there.
IN_IMAGE := USER=$${USER:-$$(id -un)} ch-run --home --bind=$(CURDIR):/mnt/1 --cd=/mnt/1 $(IMAGE) --
test-container: setup container
	$(MAKE) --no-print-directory -j2 -Otarget test-container-unit test-container-runs

test-container-unit:
	$(IN_IMAGE) python3 -m pytest tests --ignore=tests/integration

test-container-runs: setup
	$(PYTEST) tests/integration/test_container.py
