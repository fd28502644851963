"""The slurm/ scripts, submitted to a real Slurm cluster (`.ci/slurm-cluster.sh start`).

The training jobs are submitted together when the first test needs them, so they run side by
side; each test then waits for its own job and reads its output. GPU scripts run their CPU
variant (COURSE_DEVICE=cpu); the local cluster's fake GPUs still make Slurm schedule them.
"""

import csv
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch
from slurm_utils import REPO, cancel, submit, submit_detached, wait_for_text

# Every batch script the course ships; config.sh is the site settings they all source.
SCRIPTS = sorted(p.name for p in (REPO / "slurm").glob("*.sh") if p.name != "config.sh")
CPU = {"COURSE_DEVICE": "cpu"}
DDP_ARGS = ["--epochs", "2", "--images", "1024", "--batch-size", "16", "--lr", "0.05"]
TRAIN_ARGS = ["--epochs", "1", "--max-steps", "10", "--batch-size", "64"]


@pytest.mark.shellcheck
def test_scripts_pass_shellcheck():
    paths = [f"slurm/{s}" for s in SCRIPTS] + ["slurm/config.sh", ".ci/slurm-cluster.sh"]
    out = subprocess.run(["shellcheck", "-x", *paths], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


def _one_submission(folder: Path) -> Path:
    """A submissions folder holding the solution of lesson 01 as learner alice's notebook."""
    submissions = folder / "submissions"
    submissions.mkdir()
    shutil.copy(REPO / "solutions" / "01_tensors.ipynb", submissions / "alice__01_tensors.ipynb")
    return submissions


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """All batch training jobs, submitted at once (they overlap on the two nodes)."""
    out = tmp_path_factory.mktemp("slurm")
    started = {
        # one CPU per task, not the GPU bundle: the test jobs share the two nodes' 32 CPUs
        "ddp_srun": submit(
            "slurm/ddp_srun.sh",
            *DDP_ARGS,
            env=CPU,
            output_dir=out,
            sbatch_args=["--cpus-per-task=1"],
        ),
        "ddp_torchrun": submit(
            "slurm/ddp_torchrun.sh",
            *DDP_ARGS,
            env=CPU,
            output_dir=out,
            sbatch_args=["--cpus-per-task=2"],
        ),
        "cpu_job": submit(
            "slurm/cpu_job.sh", *TRAIN_ARGS, output_dir=out, sbatch_args=["--cpus-per-task=2"]
        ),
        "gpu_job": submit(
            "slurm/gpu_job.sh", *TRAIN_ARGS, "--num-workers", "0", env=CPU, output_dir=out
        ),
        "mps_job": submit(
            "slurm/mps_job.sh",
            "--epochs",
            "1",
            "--max-steps",
            "3",
            env=CPU,
            output_dir=out,
            sbatch_args=["--ntasks=2"],
        ),
        "mps_independent": submit(
            "slurm/mps_job.sh",
            "--epochs",
            "1",
            "--max-steps",
            "3",
            env={**CPU, "MPS_MODE": "independent"},
            output_dir=out,
            sbatch_args=["--ntasks=2"],
        ),
        "cpp_job": submit(
            "slurm/cpp_job.sh",
            "--batch",
            "8",
            env=CPU,
            output_dir=out,
            sbatch_args=["--cpus-per-task=2"],
        ),
        "grade_job": submit(
            "slurm/grade_job.sh",
            _one_submission(out),
            "--lesson",
            "01",
            "--out",
            out / "grading",
            output_dir=out,
            sbatch_args=["--cpus-per-task=2"],
        ),
    }
    yield started
    for job in started.values():  # a failed test must not leave jobs queued
        if job.job_id is None:
            job.wait(timeout=1)  # never waited for: stop sbatch and cancel the job
        if job.job_id:
            cancel(job.job_id)


def _check_ddp(result, world_size=4):
    assert result.returncode == 0, result.output
    text = result.output
    joined = sorted(
        int(r) for r in re.findall(rf"rank (\d+)/{world_size} \(local \d+\) on \S+: joined", text)
    )
    assert joined == list(range(world_size)), text
    assert set(re.findall(r" on (\S+): joined", text)) == {"cn1", "cn2"}, text  # two nodes
    losses = [float(x) for x in re.findall(r"^epoch \d+: loss ([\d.]+)", text, re.M)]
    assert len(losses) == 2 and losses[1] < losses[0], text
    sums = re.findall(r"rank \d+: parameter checksum ([0-9a-f]{16})", text)
    assert len(sums) == world_size and len(set(sums)) == 1, text
    assert re.search(r"throughput: [\d,]+ images/s with 4 processes", text)


@pytest.mark.slurm
def test_ddp_srun_four_ranks_on_two_nodes(jobs):
    result = jobs["ddp_srun"].wait(timeout=150)
    _check_ddp(result)
    assert "from slurm" in result.output  # ranks came from SLURM_PROCID & co


@pytest.mark.slurm
def test_ddp_torchrun_one_per_node_with_c10d_rendezvous(jobs):
    result = jobs["ddp_torchrun"].wait(timeout=150)
    _check_ddp(result)
    assert "from torchrun" in result.output


@pytest.mark.slurm
def test_cpu_job_uses_the_allocated_cpus(jobs):
    result = jobs["cpu_job"].wait(timeout=150)
    assert result.returncode == 0, result.output
    assert "device cpu, 2 torch threads, 2 allocated CPUs" in result.output
    assert re.search(r"^test: loss", result.output, re.M), result.output


@pytest.mark.slurm
def test_gpu_job_builds_a_job_virtualenv(jobs):
    result = jobs["gpu_job"].wait(timeout=150)
    assert result.returncode == 0, result.output
    assert re.search(r"job virtualenv: \S+course-env-\d+ \(torch ", result.output), result.output
    assert "device cpu" in result.output and "test: loss" in result.output


@pytest.mark.slurm
def test_mps_job_runs_ddp_replicas_that_share_the_device(jobs):
    result = jobs["mps_job"].wait(timeout=150)
    assert result.returncode == 0, result.output
    assert re.findall(r"joined, backend (\w+)", result.output) == ["gloo", "gloo"], result.output
    sums = re.findall(r"rank \d+: parameter checksum ([0-9a-f]{16})", result.output)
    assert len(sums) == 2 and len(set(sums)) == 1, result.output


@pytest.mark.slurm
def test_mps_job_independent_runs_get_different_seeds(jobs):
    result = jobs["mps_independent"].wait(timeout=150)
    assert result.returncode == 0, result.output
    seeds = sorted(re.findall(r"^task \d of 2: seed (\d+)", result.output, re.M))
    assert seeds == ["0", "1"], result.output
    losses = re.findall(r"^test: loss ([\d.]+)", result.output, re.M)
    assert len(losses) == 2 and losses[0] != losses[1], result.output


@pytest.mark.slurm
def test_interactive_runs_a_command_on_a_node():
    out = subprocess.run(
        ["slurm/interactive.sh", "printenv", "SLURM_JOB_ID", "SLURM_CPUS_PER_TASK"],
        cwd=REPO,
        env={**os.environ, **CPU},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    job_id, cpus = out.stdout.split()[-2:]
    assert job_id.isdigit() and cpus == "4"


def open_when_listening(url, output, timeout=15.0):
    """Open url, retrying while the port refuses: the server logs its address a moment before
    its socket accepts on a loaded machine."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return urllib.request.urlopen(url, timeout=10)
        except urllib.error.HTTPError:
            raise
        except urllib.error.URLError as error:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{url} refused for {timeout:.0f} s:\n{output.read_text()}"
                ) from error
            time.sleep(0.5)


@pytest.mark.slurm
def test_jupyter_job_serves_lab_on_localhost_with_a_token(tmp_path):
    job_id, output = submit_detached("slurm/jupyter_job.sh", output_dir=tmp_path)
    try:
        m = wait_for_text(output, r"port (\d+)\. .*\n.*\n.*lab\?token=([0-9a-f]+)", timeout=60)
        port, token = m.groups()
        wait_for_text(output, r"Jupyter Server .* is running at", timeout=60)
        url = f"http://127.0.0.1:{port}/api/status"
        with open_when_listening(f"{url}?token={token}", output) as response:
            assert response.status == 200
        with pytest.raises(urllib.error.HTTPError, match="403"):
            urllib.request.urlopen(url, timeout=10)
        assert "ssh -N -L 8888:localhost:" + port in output.read_text()
        assert re.search(r"ServerApp.*127\.0\.0\.1", Path(output).read_text())
    finally:
        cancel(job_id)


@pytest.mark.slurm
def test_cpp_job_builds_and_matches_python(jobs):
    result = jobs["cpp_job"].wait(timeout=300)
    assert result.returncode == 0, result.output
    # Equal up to float rounding: the C++ program and Python may split the work over a
    # different number of threads inside the job (a CI run measured 4.47e-08).
    diff = re.search(r"max \|C\+\+ - Python\| = (\S+)", result.output)
    assert diff and float(diff.group(1)) < 1e-5, result.output


@pytest.mark.slurm
def test_grade_job_grades_a_folder(jobs):
    result = jobs["grade_job"].wait(timeout=300)
    assert result.returncode == 0, result.output
    gradebook = jobs["grade_job"].output_path.parent / "grading" / "gradebook.csv"
    rows = list(csv.DictReader(gradebook.open()))
    assert [(r["learner"], r["lesson"], r["status"]) for r in rows] == [("alice", "01", "ok")]
    assert float(rows[0]["total"]) == 4, rows  # the solution earns every point
    assert rows[0]["sandbox"].startswith("bubblewrap, no network"), rows  # graded in the sandbox


@pytest.mark.slurm
@pytest.mark.parametrize(
    "script, says",
    [
        ("slurm/reference_gpu.sh", "no CUDA GPU found; nothing recorded (run this on a GPU node)"),
        ("slurm/profile_job.sh", "nsys not found: load your site's Nsight Systems module"),
    ],
)
def test_gpu_only_jobs_refuse_clearly_without_a_gpu(script, says, tmp_path):
    """Jobs that only make sense on a real GPU must fail loudly here, never exit 0 as if run."""
    if torch.cuda.is_available() or (shutil.which("nsys") and "profile" in script):
        pytest.skip("this machine could really run the job: see make test-gpu")
    result = submit("slurm/" + Path(script).name, output_dir=tmp_path).wait(timeout=120)
    assert result.returncode != 0 and says in result.output, result.output


@pytest.fixture(scope="module")
def your_project(tmp_path_factory):
    """A researcher's own folder outside the course: a DDP script written as the documentation's
    example, and the synthetic stand-in written by `course data synthetic` into ./data."""
    folder = tmp_path_factory.mktemp("your-project")
    shutil.copy(REPO / "tests" / "assets" / "your_project" / "pytorch-ddp-test.py", folder)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "course"),
            "data",
            "synthetic",
            "--root",
            "data",
            "--train-size",
            "1024",
            "--test-size",
            "64",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.slurm
@pytest.mark.parametrize("script", ["ddp_srun.sh", "ddp_torchrun.sh"])
def test_your_own_ddp_script_runs_from_your_folder(your_project, script):
    args = ["pytorch-ddp-test.py", "--init_method", "env://", "--world_size", "4"]
    result = submit(
        REPO / "slurm" / script, *args, env=CPU, output_dir=your_project, cwd=your_project
    ).wait(timeout=240)
    assert result.returncode == 0, result.output
    ranks = re.findall(r"From Rank: (\d+), world 4, checksum", result.output)
    assert sorted(map(int, ranks)) == [0, 1, 2, 3], result.output
    sums = set(re.findall(r"world 4, checksum ([0-9a-f]{16})", result.output))
    assert len(sums) == 1, result.output  # one model: the replicas agree
    assert "synthetic CIFAR-10 stand-in, not CIFAR-10" in result.output
    assert not (REPO / "data").exists() or not (REPO / "data" / "cifar-10-batches-py").exists()
