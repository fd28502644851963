"""Lesson 10's checks on real runs, on the local route (as in `course grade`'s sandbox; the
learner's jobs on Slurm: tests/integration/test_grader_class.py): 10.1 runs the solution's
function in the check's own processes and 10.2 runs the study of its script on this machine;
10.3 and 10.4 decide on the study the notebook's cell ran here; known-wrong staging functions
fail in the check's processes; a script whose runs fail is reported with its lines."""

import re
import textwrap

import pytest
from lab_answers import load

from course_utils import batch
from course_utils.grading import run_check
from course_utils.grading.checks import lesson10_cases
from course_utils.lab import cluster, run_records, small_files

LOCAL = batch.Launcher("local", "the test asks for it")


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    return load(tmp_path_factory.mktemp("answers"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, answers):
    """runs/10 after the lesson's study on this machine, run with the solution's script."""
    folder = tmp_path_factory.mktemp("runs10")
    small_files.write_dataset(folder / "data")
    study = cluster.study(LOCAL, answers.scaling_script, folder / "data", folder / "records")
    assert all(r.ok for r in study.runs), study.summary()
    return folder


def test_every_check_passes_on_the_solutions_own_runs(answers, runs):
    for exercise, answer, jobs in [
        ("10.1", answers.stage_dataset, [[]]),  # the check cells name no job: the local route
        ("10.2", answers.scaling_script, [[]]),
        ("10.3", answers.diagnose_transport, []),
        ("10.4", answers.decide, [[]]),
    ]:
        result = run_check(exercise, answer, runs, *jobs)
        assert result.passed, (exercise, result.message)
        assert result.message.startswith("[via local ranks") or exercise in ("10.3", "10.4")


def test_the_judges_own_training_is_the_1_rank_runs(runs):
    """The losses 10.2 trains itself are those lab_train logged for the same run."""
    for record in run_records.load(runs / "records"):
        if record["configuration"]["ranks"] == 1:
            config = record["configuration"]
            mine = lesson10_cases.first_losses(config["lr"], config["batch_per_rank"], 5)
            assert record["losses"][:5] == pytest.approx(mine, abs=1e-5), record["name"]


def _variant(tmp_path, name: str, body: str):
    """A wrong stage_dataset, defined in a file of its own (its source is what the check runs)."""
    path = tmp_path / f"{name}.py"
    path.write_text("import tarfile\nfrom pathlib import Path\n\n" + textwrap.dedent(body))
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["stage_dataset"]


NO_LOCK = """
    def stage_dataset(archive, environ):
        base = environ.get("SLURM_TMPDIR") or environ.get("TMPDIR") or "/tmp"
        folder = Path(base) / f"lab-{environ['SLURM_JOB_ID']}" / environ["SLURMD_NODENAME"]
        if not (folder / ".done").exists():
            with tarfile.open(archive) as tar:
                tar.extractall(folder, filter="data")
            (folder / ".done").touch()
        return folder
"""
LOCKED = """
    import fcntl

    def stage_dataset(archive, environ):
        base = {base}
        folder = Path(base) / {folder} / environ["SLURMD_NODENAME"]
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(folder.parent / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (folder / ".done").exists():
                with tarfile.open(archive) as tar:
                    tar.extractall(folder, filter="data")
                (folder / ".done").touch()
        return folder
"""
JOB = "f\"lab-{environ['SLURM_JOB_ID']}\""
RIGHT_BASE = 'environ.get("SLURM_TMPDIR") or environ.get("TMPDIR") or "/tmp"'


@pytest.mark.parametrize(
    "name, body, message",
    [
        (
            "no_lock",
            NO_LOCK,
            r"one rank (per node|of cn\d) reading the archive, got .*",
        ),
        (
            "tmpdir_first",
            LOCKED.format(
                base='environ.get("TMPDIR") or environ.get("SLURM_TMPDIR") or "/tmp"', folder=JOB
            ),
            r"^2 nodes x 2 ranks, SLURM_TMPDIR set, rank 0 on cn1: expected a folder under "
            r".*localscratch",
        ),
        (
            "one_folder_for_every_job",
            LOCKED.format(base=RIGHT_BASE, folder='"lab"'),
            # the check's next job on the node found the first job's copy
            r"^the same node and TMPDIR, the next job: expected one rank of cn1 reading the "
            r"archive, got",
        ),
    ],
)
def test_10_1_wrong_staging_functions_fail(tmp_path, name, body, message):
    fn = _variant(tmp_path, name, body)
    result = run_check("10.1", fn, tmp_path, [])
    assert result.verdict == "failed" and re.search(message, result.message), result.message


def test_10_2_a_script_whose_runs_fail_is_reported_with_its_lines(answers, tmp_path):
    """The check's own study of the script: every run ends before training."""
    broken = answers.scaling_script().replace('lab_train "$@"', 'lab_train --batch-size 0 "$@"')
    result = run_check("10.2", lambda: broken, tmp_path, [])
    # job_config refuses the option before training starts: a usage error, in every run's log
    assert result.message.startswith("your script's runs wrote no record; the last lines of run")
    assert "--batch-size 0: must be at least 1" in result.message
