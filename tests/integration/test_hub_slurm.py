"""The course where centres run it: the kernel inside a Slurm job, started as centres start it.

- A JupyterHub whose spawner is batchspawner's SlurmSpawner, with README's settings: a learner
  logs in in Chromium, their server starts as a job step on a compute node (the test reads the
  job and node from squeue, and the kernel says it lives there), lesson 05's DDP, FSDP and
  Lightning launches run in that job, lesson 02's widgets are live, and stopping the server ends
  the job.
- Open OnDemand's way: slurm/jupyter_job.sh with the server in the batch script itself and cores
  asked as tasks (`--nodes=1 --ntasks-per-node=4`); lesson 05's launches run there too.

Each learner opens a copy of notebooks/ in their own folder, as a hub hands the course out.
Screenshots go to test-artifacts/browser/. Set-up: .ci/browser-setup.sh and
.ci/slurm-cluster.sh start.
"""

from __future__ import annotations

import json
import time
import uuid

import browser_support as bs
import nbformat
import needs
import pytest
import slurm_hub_support as hub
from slurm_utils import cancel, submit_detached, wait_for_text

pytestmark = [pytest.mark.browser, pytest.mark.slurm, pytest.mark.slow]
LESSON_02 = "02_cpu_to_gpu.ipynb"
CELL_TIMEOUT = 300  # one launch takes 10-30 s on two idle cores, minutes on busy ones


@pytest.fixture(scope="module")
def playwright():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture
def page(playwright, tmp_path):
    context = bs.launch_browser(playwright, tmp_path / "chromium-profile")
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def slurm_hub(tmp_path):
    """The centre's hub with README's SlurmSpawner settings; yields (base URL, job marker)."""
    singleuser = bs.CENTRE / "bin" / "batchspawner-singleuser"
    if not singleuser.exists():
        reason = f"batchspawner is not in {bs.CENTRE} ({bs.SETUP_HINT})"
        pytest.fail(reason) if needs.in_ci() else pytest.skip(reason)
    hub.copy_course_folder(tmp_path / "home" / "learner")
    marker = f"course-hub-{uuid.uuid4().hex[:12]}"
    port = bs.free_port()
    config = hub.write_hub_config(tmp_path, port, marker)
    proc = bs.start(
        [str(bs.CENTRE / "bin" / "jupyterhub"), "-f", str(config)],
        tmp_path / "hub.log",
        cwd=tmp_path,
    )
    try:
        bs.wait_for_http(
            f"http://127.0.0.1:{port}/hub/api", proc, tmp_path / "hub.log", 120, statuses=(200,)
        )
        yield f"http://127.0.0.1:{port}", marker
    finally:
        bs.stop(proc, leftovers_under=tmp_path)  # the hub cancels its jobs as it stops
        for job in hub.jobs_with_comment(marker):
            cancel(job["id"])


@pytest.fixture
def centre_kernel():
    """The course kernel registered in the centre's venv for this test, and gone after it."""
    try:
        yield hub.register_kernel_in_centre()
    finally:
        bs.remove_centre_kernel()


def test_slurmspawner_hub_runs_lessons_in_the_learners_job(page, slurm_hub, centre_kernel):
    base, marker = slurm_hub
    course_python = centre_kernel
    started = time.monotonic()
    bs.hub_login(page, base, "learner")
    job = hub.wait_for_running_job(marker)
    spawned = time.monotonic() - started
    assert job["node"] in ("cn1", "cn2"), job

    # The server offers the course's kernel (registered in the centre's venv): its interpreter.
    bs.open_notebook(page, f"{base}/user/learner/lab/tree/notebooks/{hub.LESSON_05}")
    specs = json.loads(page.request.get(f"{base}/user/learner/api/kernelspecs").text())
    assert specs["kernelspecs"]["course"]["spec"]["argv"][0] == course_python, specs

    seconds_05 = hub.assert_lesson05_launches_ran(page, "hub-slurm", CELL_TIMEOUT)
    seen = hub.kernel_slurm_variables(page)
    # The kernel lives in the job squeue lists, on its node, in a job step (srun) of one task.
    assert (seen["SLURM_JOB_ID"], seen["SLURMD_NODENAME"]) == (job["id"], job["node"]), seen
    assert seen["SLURM_STEP_ID"] == "0" and seen["SLURM_NTASKS"] == "1", seen
    assert seen["SLURM_CPUS_PER_TASK"] == "4", seen

    bs.open_notebook(page, f"{base}/user/learner/lab/tree/notebooks/{LESSON_02}")
    seconds_02 = bs.run_cells(page, _cells_lesson02_widget_needs(), CELL_TIMEOUT)
    bs.assert_live_widget_answers(page, "hub-slurm-02")

    page.goto(f"{base}/hub/home")
    stopped = time.monotonic()
    page.locator("#stop").click()
    page.locator("#stop").wait_for(state="hidden", timeout=120_000)  # the hub: server stopped
    hub.wait_until_squeue_drops(job["id"])
    gone = time.monotonic() - stopped
    bs.screenshot(page, "hub-slurm-stopped")
    print(
        f"hub + SlurmSpawner: login to running job {job['id']} on {job['node']} {spawned:.1f} s, "
        f"lesson 05 launches {seconds_05:.1f} s, lesson 02 to its widget {seconds_02:.1f} s, "
        f"job gone from squeue {gone:.1f} s after Stop My Server"
    )


def _cells_lesson02_widget_needs() -> list[int]:
    """Lesson 02's cells before its training loop (imports, data, loaders, model and loss), the
    training step the widget times, and the widget's own cell: positions in the .ipynb."""
    nb = nbformat.read(bs.ROOT / "notebooks" / LESSON_02, as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    loop = next(i for i in code if "for epoch" in nb.cells[i].source)
    step = next(i for i in code if "def train_step" in nb.cells[i].source)
    widget = next(i for i in code if "import ipywidgets" in nb.cells[i].source)
    return [i for i in code if i < loop] + [step, widget]


def test_jupyter_job_in_batch_script_with_cores_as_tasks_runs_lesson05(page, tmp_path):
    """Open OnDemand's way: the server in the batch script, `--nodes=1 --ntasks-per-node=4`."""
    home = tmp_path / "home"
    hub.copy_course_folder(home)
    env = {
        "COURSE_JUPYTER_IN": "batch",
        "COURSE_LAB_DIR": str(home),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
    }
    job_id, output = submit_detached(
        "slurm/jupyter_job.sh",
        env=env,
        output_dir=tmp_path,
        sbatch_args=["--nodes=1", "--ntasks-per-node=4", "--cpus-per-task=1"],
    )
    try:
        m = wait_for_text(output, r"port (\d+)\. .*\n.*\n.*lab\?token=([0-9a-f]+)", timeout=120)
        port, token = m.groups()
        wait_for_text(output, r"Jupyter Server .* is running at", timeout=120)
        assert "server in the batch script: 4 task(s)" in output.read_text()
        url = f"http://127.0.0.1:{port}/lab/tree/notebooks/{hub.LESSON_05}?token={token}"
        bs.open_notebook(page, url)
        seconds = hub.assert_lesson05_launches_ran(page, "ood-batch", CELL_TIMEOUT)
        seen = hub.kernel_slurm_variables(page)
        # In the batch script, not a step: the job's four tasks are what the kernel sees.
        assert seen["SLURM_JOB_ID"] == job_id and seen["SLURM_NTASKS"] == "4", seen
        assert seen["SLURM_NTASKS_PER_NODE"] == "4" and seen["SLURM_STEP_ID"] == "-", seen
    finally:
        cancel(job_id)
    print(f"jupyter_job.sh in the batch script (4 tasks): lesson 05 launches {seconds:.1f} s")
