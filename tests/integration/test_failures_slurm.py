"""Lesson 09 on a real Slurm cluster (`.ci/slurm-cluster.sh start`): the stacks of every rank of
a deliberately hung job (slurm/stacks.sh), the lesson's broken batch script, which hangs at
start-up, next to the solution's repair, which completes, and the 09.3 check of the learner's
own submission, read from the job's output and from the scheduler's record (sacct)."""

import re
import subprocess
import time
from pathlib import Path

import nbformat
import pytest
from slurm_utils import REPO, cancel, submit, submit_detached, wait_for_text

from course_utils import batch, sbatch
from course_utils.failing import failures, stacks
from course_utils.grading import run_check
from course_utils.grading.notebooks import course_meta

CPU = {"COURSE_DEVICE": "cpu"}


def _stacks_by_rank(text: str) -> dict[tuple[int, str], list[str]]:
    """(rank, node) -> main-thread frames, from slurm/stacks.sh's "[rank R on NODE] ..." lines."""
    lines: dict[tuple[int, str], list[str]] = {}
    for m in re.finditer(r"^\[rank (\d+) on (\S+)\] ?(.*)$", text, re.M):
        lines.setdefault((int(m[1]), m[2]), []).append(m[3])
    return {key: stacks.frames("\n".join(dump)) for key, dump in lines.items()}


def _in_place(found) -> bool:
    """Rank 1 stalls in load_next_batch; ranks 0, 2 and 3 wait for it in average_gradients."""
    by_rank = {rank: frames for (rank, _), frames in found.items()}
    return sorted(by_rank) == [0, 1, 2, 3] and all(
        by_rank[r][:2] == ["stall", "load_next_batch"]
        if r == 1
        else "average_gradients" in by_rank[r]
        for r in by_rank
    )


@pytest.mark.slurm
def test_stacks_of_every_rank_of_a_hung_job(tmp_path):
    job_id, output = submit_detached(
        "slurm/ddp_srun.sh",
        "-m",
        "course_utils.jobs.faulty_ddp",
        "--fault",
        "hang",
        "--timeout",
        "300",
        env=CPU,
        output_dir=tmp_path,
    )
    try:
        wait_for_text(output, r"(?s)(step 1 done.*){4}", timeout=120)  # every rank did step 1
        for _ in range(10):  # the waiting ranks enter all_reduce an instant after step 1
            done = subprocess.run(
                ["bash", "slurm/stacks.sh", job_id],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=60,
            )
            found = _stacks_by_rank(done.stdout)
            if done.returncode == 0 and _in_place(found):
                break
            time.sleep(1)
        assert done.returncode == 0 and _in_place(found), done.stdout + done.stderr
        assert {node for _, node in found} == {"cn1", "cn2"}, found
    finally:
        cancel(job_id)


def _solution() -> dict:
    nb = nbformat.read(REPO / "solutions" / "09_when_jobs_fail.ipynb", as_version=4)
    cell = next(c for c in nb.cells if course_meta(c).get("exercise") == "09.3")
    namespace: dict = {"batch": batch, "failures": failures, "sbatch": sbatch, "Path": Path}
    exec(cell.source, namespace)
    return namespace


def _solutions_repaired_script() -> str:
    return _solution()["repaired_script"](failures.BROKEN_BATCH_SCRIPT)


@pytest.mark.slurm
def test_broken_batch_script_hangs_and_the_repair_completes(tmp_path):
    broken, repaired = tmp_path / "broken.sh", tmp_path / "repaired.sh"
    broken.write_text(failures.BROKEN_BATCH_SCRIPT)
    repaired.write_text(_solutions_repaired_script())
    job_id, output = submit_detached(broken, output_dir=tmp_path)
    fixed = submit(repaired, output_dir=tmp_path)
    try:
        wait_for_text(output, r"rank 0/2: started", timeout=90)
        limit = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True)
        assert "TimeLimit=00:05:00" not in limit.stdout, limit.stdout  # its --time was ignored
        result = fixed.wait(timeout=120)
        assert result.returncode == 0, result.output
        assert sorted(re.findall(r"rank (\d): finished", result.output)) == ["0", "1"]
        # one Python, rank 0 of 2, waits for a rank 1 that never comes, until its own timeout
        wait_for_text(output, r"rank 0: not all 2 processes joined within 20 s", timeout=90)
        assert "rank 1/2: started" not in output.read_text()
    finally:
        cancel(job_id)


@pytest.mark.slurm
def test_checker_09_3_submits_the_learners_job_and_reads_sacct(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the notebook's folder: the job's output goes to runs/09/jobs
    monkeypatch.setenv("COURSE_LAUNCHER", "slurm")
    answer = _solution()
    done = run_check("09.3", answer["repaired_script"], answer["run_repaired"], seed=2024)
    assert done.passed, done.message
    logs = list((tmp_path / "runs" / "09" / "jobs").glob("ddp-repaired-*.out"))
    assert logs and "seed 2024, parameter sum" in logs[0].read_text()

    def an_old_job(script, folder, seed):  # a finished job of someone else's, its id typed in
        return batch.Job("ddp-repaired", "slurm", 0, logs[0].read_text(), 1.0, "1", "COMPLETED")

    forged = run_check("09.3", answer["repaired_script"], an_old_job, seed=2024)
    assert forged.verdict == "failed" and "that no run of theirs made" in forged.message
