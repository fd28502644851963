"""Lesson 10's checkers that run things, for real: 10.1 starts one process per rank (the ranks of
a node at the same moment) and 10.2 runs the learner's script with the local launcher (as in
`course grade`'s sandbox; tests/integration/test_lab_slurm.py submits it to Slurm). Each on the
solution notebook's answer and on known-wrong ones."""

import re
import textwrap

import pytest
from lab_answers import load

from course_utils import batch
from course_utils.grading import run_check


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    return load(tmp_path_factory.mktemp("answers"))


def test_10_1_the_solution_stages_once_per_node(answers):
    result = run_check("10.1", answers.stage_dataset)
    assert result.passed, result.message


def _variant(tmp_path, name: str, body: str):
    """A wrong stage_dataset, defined in a file of its own (its source is what the check runs)."""
    path = tmp_path / f"{name}.py"
    path.write_text("import tarfile\nfrom pathlib import Path\n\n" + textwrap.dedent(body))
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["stage_dataset"]


def test_10_1_without_a_lock_both_ranks_of_a_node_unpack(tmp_path):
    no_lock = _variant(
        tmp_path,
        "no_lock",
        """
        def stage_dataset(archive, environ):
            base = environ.get("SLURM_TMPDIR") or environ.get("TMPDIR") or "/tmp"
            folder = Path(base) / f"lab-{environ['SLURM_JOB_ID']}" / environ["SLURMD_NODENAME"]
            if not (folder / ".done").exists():
                with tarfile.open(archive) as tar:
                    tar.extractall(folder, filter="data")
                (folder / ".done").touch()
            return folder
    """,
    )
    result = run_check("10.1", no_lock)
    assert result.verdict == "failed"
    assert re.search(r"expected one rank of cn\d reading the archive, got 2", result.message)
    assert "(a lock)" in result.message


def test_10_1_tmpdir_before_slurm_tmpdir_is_wrong(tmp_path):
    wrong_order = _variant(
        tmp_path,
        "wrong_order",
        """
        import fcntl

        def stage_dataset(archive, environ):
            base = environ.get("TMPDIR") or environ.get("SLURM_TMPDIR") or "/tmp"
            folder = Path(base) / f"lab-{environ['SLURM_JOB_ID']}" / environ["SLURMD_NODENAME"]
            folder.parent.mkdir(parents=True, exist_ok=True)
            with open(folder.parent / "lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not (folder / ".done").exists():
                    with tarfile.open(archive) as tar:
                        tar.extractall(folder, filter="data")
                    (folder / ".done").touch()
            return folder
    """,
    )
    result = run_check("10.1", wrong_order)
    assert result.message.startswith(
        "2 nodes x 2 ranks, SLURM_TMPDIR set, rank 0 on cn1: expected a folder under "
    ), result.message
    assert "localscratch" in result.message


def test_10_1_a_folder_shared_by_every_job_reuses_an_old_copy(tmp_path):
    no_job = _variant(
        tmp_path,
        "no_job",
        """
        import fcntl

        def stage_dataset(archive, environ):
            base = environ.get("SLURM_TMPDIR") or environ.get("TMPDIR") or "/tmp"
            folder = Path(base) / "lab" / environ["SLURMD_NODENAME"]
            folder.parent.mkdir(parents=True, exist_ok=True)
            with open(folder.parent / "lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not (folder / ".done").exists():
                    with tarfile.open(archive) as tar:
                        tar.extractall(folder, filter="data")
                    (folder / ".done").touch()
            return folder
    """,
    )
    result = run_check("10.1", no_job)
    assert result.message.startswith(
        "the same node and TMPDIR, the next job: expected one rank of cn1 reading the archive, "
        "got 0"
    ), result.message


def test_10_2_the_solution_script_runs_locally(answers, tmp_path, monkeypatch):
    monkeypatch.setenv(batch.LAUNCHER_VARIABLE, "local")
    result = run_check("10.2", answers.scaling_script, tmp_path)
    assert result.passed, result.message
    assert result.message.endswith("[via local ranks: no Slurm here]")


def test_10_2_a_script_whose_program_fails_is_reported_with_its_lines(
    answers, tmp_path, monkeypatch
):
    monkeypatch.setenv(batch.LAUNCHER_VARIABLE, "local")
    broken = answers.scaling_script().replace('lab_train "$@"', 'lab_train --batch-size 0 "$@"')
    result = run_check("10.2", lambda: broken, tmp_path)
    # job_config refuses the option before training starts: a usage error, exit code 2
    said = "your script at 1 node x 1 task ended with exit code 2 [via local ranks: no Slurm"
    assert result.message.startswith(said), result.message
    assert "--batch-size 0: must be at least 1" in result.message
