"""Lesson 09's out-of-memory job on a real Slurm cluster (`.ci/slurm-cluster.sh start`, which
enforces --mem: ConstrainRAMSpace=yes): DataLoader workers that each copy 256 MiB of images are
killed in a job allowed 1 GiB, Slurm says so, and each fix fits (course_utils.failing.cluster_oom,
the same runs `cluster_oom.record` keeps for the lesson)."""

import re
import subprocess
import sys

import pytest
from slurm_utils import REPO

from course_utils.failing import cluster_oom

MEASURED = r"held by the main process and its workers, each shared page once: (\d+) MiB"
LIMIT = r"memory limit of this job step \(its cgroup\): (\d+) MiB"


def _fits(run: cluster_oom.JobRun) -> bool:
    held, limit = re.search(MEASURED, run.output), re.search(LIMIT, run.output)
    return bool(held and limit) and int(held[1]) < int(limit[1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return cluster_oom.run_on_cluster(tmp_path_factory.mktemp("loader-oom"))


@pytest.mark.slurm
def test_workers_that_each_copy_the_data_set_are_killed_by_the_cgroup(runs):
    copies = runs["copies"]
    report = copies.report()
    assert copies.exit_code == 1, copies.output  # srun's own exit code for an OOM-killed task
    assert report.oom_killed and report.events >= 1, copies.output
    assert re.fullmatch(r"\d+\.0", report.step), report  # the srun step, not the batch script
    assert re.search(r"srun: error: cn\d: task 0: Out Of Memory", copies.output)
    assert "limit of this job step (its cgroup): 1024 MiB" in copies.output
    assert "finished" not in copies.output
    # the batch script ended with srun's 1 (set -e): the job FAILED; sacct's record of the
    # step says what happened to it
    assert copies.state.startswith("JobState=FAILED ExitCode=1"), copies.state
    assert re.search(r"\b\d+\.0=OUT_OF_MEMORY\b", copies.state), copies.state
    if copies.kernel:  # dmesg is readable here (root): the kernel names whom it killed
        assert copies.killed() and all(
            re.match(r"(main process|worker \d) \(pid \d+\)", k) for k in copies.killed()
        ), (copies.killed(), copies.kernel)


@pytest.mark.slurm
@pytest.mark.parametrize("fix", ["shares", "one worker", "more memory"])
def test_each_fix_fits_and_says_what_it_held(runs, fix):
    run = runs[fix]
    assert run.exit_code == 0 and not run.report().oom_killed, run.output
    assert "finished: 8 batches" in run.output or "finished: 2 batches" in run.output
    assert _fits(run), run.output


@pytest.mark.slurm
def test_python_started_by_the_batch_script_is_killed_and_says_how(runs):
    run = runs["no srun"]
    assert run.exit_code == 1, run.output  # the job failed (OUT_OF_MEMORY)
    code = re.search(r"exit code of python: (\d+)", run.output)
    if code and code[1] == "137":  # the kernel took the main process: 128 + SIGKILL's 9
        assert re.search(r"^(.*line \d+: +\d+ )?Killed\b", run.output, re.M), run.output
    else:  # it took a worker first: the main process saw it die, said so, and exited 1
        assert code and code[1] == "1" and run.report().killed_worker, run.output
    assert run.state.startswith("JobState=OUT_OF_MEMORY"), run.state
    assert re.search(r"\b\d+\.batch=OUT_OF_MEMORY\b", run.state), run.state
    assert run.report().step.endswith(".batch"), run.report()


@pytest.mark.slurm
def test_the_lesson_runs_the_steps_itself_inside_a_job(tmp_path):
    """A kernel inside a job (a centre's hub): cluster_oom.for_lesson runs the srun cases as
    steps of that job, each with its own --mem."""
    program = (
        "from course_utils.failing import cluster_oom; "
        f"found = cluster_oom.for_lesson({str(tmp_path)!r}); print(found.source); "
        "[print(name, run.exit_code, run.report().oom_killed) for name, run in found.runs.items()]"
    )
    out = tmp_path / "in-job.out"
    done = subprocess.run(
        [
            "sbatch",
            "--wait",
            f"--output={out}",
            "--mem=4G",
            "--cpus-per-task=2",
            "--time=00:05:00",
            "--wrap",
            f"{sys.executable} -c {program!r}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    text = out.read_text() if out.exists() else done.stdout + done.stderr
    assert done.returncode == 0, text
    assert re.search(r"run now, as steps of job \d+;", text), text
    assert "copies 1 True" in text and "shares 0 False" in text, text
    # never run as the kernel's own process (it would kill the kernel): the recorded one is shown
    assert "no srun: the run recorded on" in text, text
