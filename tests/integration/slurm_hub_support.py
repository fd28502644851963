"""A centre's JupyterHub whose spawner is batchspawner's SlurmSpawner, on the CI Slurm cluster, and
what tests/integration/test_hub_slurm.py reads from Slurm and from lesson 05.

The spawner settings are README's ("JupyterHub with Slurm"), read from README itself, so what a
centre admin is given is what ran here. This module adds only what one machine needs: the hub on
127.0.0.1, dummy logins, and, since the hub runs as root and the learners have no accounts here,
their homes under the test's folder and jobs submitted as root.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import browser_support as bs
import nbformat
import pytest

from course_utils.paths import REPO_ROOT

README_MARKER = "# Learners' servers as Slurm jobs (batchspawner's SlurmSpawner)"
LESSON_05 = "05_distributed_data_parallel.ipynb"

HUB_CONFIG = """\
# A centre's hub on the CI Slurm cluster: dummy logins, each learner's server a Slurm job.
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"  # the compute nodes are this machine
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{tmp}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{tmp}/cookie_secret"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.ConfigurableHTTPProxy.command = ["{proxy}"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"

# ---- README's spawner settings, as a centre admin copies them
{readme}
# ---- what this one machine adds
from batchspawner import SlurmSpawner
from traitlets import default


class OneMachineSlurmSpawner(SlurmSpawner):
    \"\"\"No account per learner here: homes under the test folder, jobs submitted as root.\"\"\"

    @default("req_homedir")
    def _homedir(self):
        return "{tmp}/home/" + self.user.name

    def user_env(self, env):
        env.update(USER=self.user.name, HOME=self.req_homedir, SHELL="/bin/bash")
        return env


c.JupyterHub.spawner_class = OneMachineSlurmSpawner
c.BatchSpawnerBase.exec_prefix = ""  # the default is sudo -E -u {{username}}
c.Spawner.args = {args!r}
c.BatchSpawnerBase.req_runtime = "00:30:00"
# The test finds its jobs in squeue by this comment.
c.BatchSpawnerBase.req_options = "--comment={marker}"
"""


def readme_spawner_settings() -> str:
    """The python block of README's JupyterHub-with-Slurm section, dedented."""
    text = (REPO_ROOT / "README.md").read_text()
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, re.M | re.S)
    found = [body for _, body in blocks if README_MARKER in body]
    assert len(found) == 1, f"README has {len(found)} python blocks starting {README_MARKER!r}"
    return textwrap.dedent(found[0])


def write_hub_config(tmp: Path, port: int, marker: str) -> Path:
    args = ["--allow-root"] if os.geteuid() == 0 else []
    config = tmp / "jupyterhub_config.py"
    config.write_text(
        HUB_CONFIG.format(
            port=port,
            hub_port=bs.free_port(),
            proxy_api_port=bs.free_port(),
            tmp=tmp,
            proxy=bs.PROXY,
            readme=readme_spawner_settings(),
            args=args,
            marker=marker,
        )
    )
    return config


def register_kernel_in_centre() -> str:
    """README's step 2: the course kernel in the centre's venv (its --prefix), where a learner's
    server looks. Returns the interpreter the kernel runs (this checkout's .venv)."""
    python = str(REPO_ROOT / ".venv" / "bin" / "python")
    subprocess.run(
        [
            python,
            "-m",
            "ipykernel",
            "install",
            "--prefix",
            str(bs.CENTRE),
            "--name",
            "course",
            "--display-name",
            bs.KERNEL_DISPLAY,
        ],
        check=True,
        capture_output=True,
    )
    return python


def copy_course_folder(home: Path) -> Path:
    """A copy of notebooks/ in the learner's folder, as a hub hands the course out."""
    dest = home / "notebooks"
    shutil.copytree(REPO_ROOT / "notebooks", dest, ignore=shutil.ignore_patterns("runs", ".*"))
    return dest


# ---------------------------------------------------------------- Slurm, as the test reads it


def jobs_with_comment(marker: str) -> list[dict[str, str]]:
    """squeue's jobs carrying `marker` as their comment: id, node, state."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i|%N|%T|%k"], capture_output=True, text=True, timeout=30
    )
    jobs = []
    for line in out.stdout.splitlines():
        job_id, node, state, comment = line.split("|", 3)
        if comment == marker:
            jobs.append({"id": job_id, "node": node, "state": state})
    return jobs


def wait_for_running_job(marker: str, timeout: float = 60) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [j for j in jobs_with_comment(marker) if j["state"] == "RUNNING"]
        if running:
            assert len(running) == 1, running
            return running[0]
        time.sleep(0.5)
    pytest.fail(f"no running job with comment {marker} in squeue after {timeout} s")


def wait_until_squeue_drops(job_id: str, timeout: float = 90) -> None:
    """Wait until squeue no longer lists the job (a cancelled job shows COMPLETING first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=30
        )
        if not out.stdout.strip():  # gone (squeue may also say "Invalid job id" on stderr)
            return
        time.sleep(0.5)
    pytest.fail(f"squeue still lists job {job_id} {timeout} s after the server was stopped")


# ---------------------------------------------------------------- lesson 05 in the browser


# What a launch says about its ranks: "rank 1/2 (local 1)", "MEMBER: 2/2", "rank 0:", "2 ranks".
RANKS = re.compile(r"\brank \d+/\d+|MEMBER: \d+/\d+|\brank \d+:|\b\d+ ranks\b")


def lesson05_launch_cells() -> tuple[list[int], dict[int, str], dict[int, list[str]]]:
    """Positions of lesson 05's cells to run: its first code cell (the imports), every cell that
    launches ranks (distributed.launch: torchrun's DDP, Lightning; batch.local_run: one
    process, FSDP) and every cell that reads a launch's output. Returns them with what the
    solution shows: the output of each checked cell (not tagged nbval-ignore-output), and the
    ranks each launch reports."""
    student = nbformat.read(REPO_ROOT / "notebooks" / LESSON_05, as_version=4)
    solution = nbformat.read(REPO_ROOT / "solutions" / LESSON_05, as_version=4)
    code = [i for i, c in enumerate(student.cells) if c.cell_type == "code"]
    starts = ("distributed.launch(", "batch.local_run(")
    launches = [i for i in code if any(s in student.cells[i].source for s in starts)]
    readers = [i for i in code if ".output" in student.cells[i].source]
    wanted = sorted({code[0], *launches, *readers})
    texts, ranks = {}, {}
    for i in wanted:
        cell = solution.cells[i]
        assert cell.get("id") == student.cells[i].get("id"), "solutions/ and notebooks/ differ"
        assert all(o.get("name") == "stdout" for o in cell.outputs), f"cell {i}: {cell.outputs}"
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        if i in launches:
            ranks[i] = sorted(RANKS.findall(text))
        elif "nbval-ignore-output" not in cell.metadata.get("tags", []) and i != code[0]:
            texts[i] = text
    return wanted, texts, ranks


def assert_lesson05_launches_ran(page, name: str, timeout: float) -> float:
    """Run lesson 05's launch cells in the notebook on show: no error or stderr output (the
    solution shows none in these cells), each launch reports
    the ranks the solution's does (two for DDP, FSDP and Lightning), each checked cell shows what
    the solution shows. Returns the seconds the cells took."""
    cells, texts, ranks = lesson05_launch_cells()
    seconds = bs.run_cells(page, cells, timeout)
    bs.screenshot(page, f"{name}-05")
    for index in cells:  # the solution shows none: a traceback or a warning is new here
        stderr = bs.cell_output(page, index, bs.STDERR)
        assert not stderr, f"lesson 05 cell {index}: error or stderr output\n{stderr[-4000:]}"
    assert any("lightning" in bs.cell_at(page, i).text_content() for i in ranks), ranks
    for index, expected in ranks.items():
        shown = bs.cell_output(page, index)
        assert sorted(RANKS.findall(shown)) == expected, (
            f"cell {index} launched other ranks than the solution's {expected}:\n{shown}"
        )
    for index, text in texts.items():
        shown = bs.cell_output(page, index)
        assert _lines(shown) == _lines(text), f"cell {index}: shown {shown!r}, solution {text!r}"
    return seconds


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def kernel_slurm_variables(page) -> dict[str, str]:
    """Ask the kernel which job it lives in: a learner's probe cell at the end of the notebook."""
    probe = bs.cell_at(page, bs.notebook(page).locator(".jp-Cell").count())  # the one added below
    names = [
        "SLURM_JOB_ID",
        "SLURMD_NODENAME",
        "SLURM_STEP_ID",
        "SLURM_NTASKS",
        "SLURM_NTASKS_PER_NODE",
        "SLURM_CPUS_PER_TASK",
    ]
    code = f"import os; print({{k: os.environ.get(k, '-') for k in {names!r}}})"
    bs.add_cell_and_run(page, code)
    output = probe.locator(".jp-OutputArea-output").first
    output.wait_for(timeout=60_000)
    found = re.findall(r"'(\w+)': '([^']*)'", output.text_content())
    return dict(found)
