"""The batch scripts in slurm/, read as Slurm reads them: the course's rules, without a cluster.

Every script: an SBATCH header with a time limit, the site settings from config.sh, one srun
line, how to submit it. GPU scripts: the CPUs of a GPU bundle (hpc.CPUS_PER_GPU per GPU), and
DataLoader workers left to the programs' one rule (hpc.loader_workers: one per allocated CPU).
"""

import re

import pytest

from course_utils import hpc, sbatch
from course_utils.paths import REPO_ROOT

SCRIPTS = sorted(p for p in (REPO_ROOT / "slurm").glob("*.sh") if p.name != "config.sh")


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_each_script_sources_the_site_config_and_has_one_srun(path):
    text = path.read_text()
    assert re.search(r"^source .*config\.sh\"$", text, re.M), "site settings from config.sh"
    assert len(re.findall(r"^(exec )?srun ", text, re.M)) == 1
    if path.name != "interactive.sh":
        assert "#SBATCH --time=" in text and f"sbatch slurm/{path.name}" in text


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_gpu_scripts_ask_for_a_bundles_cpus_per_gpu(path):
    request = sbatch.read_request(path.read_text())
    if not request.gpus_per_node:
        return
    tasks_per_node = request.tasks_per_node or request.tasks or 1
    cpus_per_gpu = request.cpus_per_task * tasks_per_node / request.gpus_per_node
    assert cpus_per_gpu >= hpc.CPUS_PER_GPU, (
        f"{path.name}: {cpus_per_gpu:g} CPUs per GPU; ask for hpc.CPUS_PER_GPU="
        f"{hpc.CPUS_PER_GPU} (the data loading of a GPU job needs them)"
    )


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_srun_is_given_the_cpus_per_task_explicitly(path):
    # Slurm 22.05 to 23.02: srun no longer reads SLURM_CPUS_PER_TASK from the batch script's
    # environment, so a task could get 1 CPU where the job asked for 4; centres' documentation
    # passes it again. (stacks.sh attaches to another job and asks for nothing of its own.)
    text = path.read_text()
    if path.name == "stacks.sh" or not sbatch.read_request(text).cpus_per_task:
        return
    srun = re.search(r"^(exec )?srun .*$", text, re.M)[0]
    asks_itself = re.search(r"--cpus-per-task=\d+", srun)  # interactive.sh: srun is the request
    assert asks_itself or '-c "$SLURM_CPUS_PER_TASK"' in srun, f"{path.name}: {srun}"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_script_sets_its_own_worker_count(path):
    # one rule, in the programs (hpc.loader_workers), not a second one in a script
    assert "--num-workers" not in path.read_text(), path.name


def test_loader_workers_rule(monkeypatch):
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "6")
    monkeypatch.setattr(hpc, "affinity_cpus", lambda: 16)  # a node that binds no cores
    assert hpc.loader_workers("cuda") == 6 and hpc.loader_workers("cpu") == 0
    job = {"SLURM_CPUS_PER_TASK": "12"}  # another job's variables, as the 02.4 checker passes
    assert hpc.loader_workers("cuda:1", job) == 12 and hpc.loader_workers("cpu", job) == 0
