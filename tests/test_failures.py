"""course_utils.failing.failures: reading torchrun logs, batch-script rules, the environment patch.

The logs are the course's recorded runs (real torchrun output with the truth the program
wrote); provoking failures and forked ranks are in tests/integration/test_failures_runs.py."""

import json
import os

import pytest
import torch

from course_utils import environment, launching
from course_utils.failing import failures
from course_utils.failing.failures import RECORDED_FAULTS, RECORDED_RUNS


@pytest.fixture(scope="module")
def recorded():
    return {run.name: run for run in failures.load_runs(RECORDED_RUNS)}


def test_every_recorded_run_is_there_with_its_truth(recorded):
    assert sorted(recorded) == sorted(f"{fault}-rank{rank}" for fault, rank in RECORDED_FAULTS)
    for name, run in recorded.items():
        fault, rank = name.rsplit("-rank", 1)
        assert (run.truth["fault"], run.faulty_rank) == (fault, int(rank))
        assert run.cause == failures.CAUSES[fault] and run.truth["world_size"] == 2


def test_torchruns_root_cause_is_a_rank_that_waited(recorded):
    for name in ("hang-rank1", "never-joins-rank1"):
        assert failures.root_cause_rank(recorded[name].output) == 0
    assert failures.root_cause_rank(recorded["oom-rank1"].output) == 1
    assert failures.root_cause_rank("no summary here") is None


def test_error_lines_and_exit_codes(recorded):
    hang = recorded["hang-rank1"]
    errors = failures.error_lines(hang.output)
    assert list(errors) == [0] and "Timed out waiting" in errors[0][0]
    assert failures.exit_codes(hang.output) == {0: 1, 1: 143}  # 143: stopped, record dumped
    oom = failures.error_lines(recorded["oom-rank0"].output)
    assert "DefaultCPUAllocator: can't allocate memory" in oom[0][0]


def test_load_runs_skips_folders_without_a_run(tmp_path):
    (tmp_path / "flight-records").mkdir()
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "truth.json").write_text("{}")
    assert failures.load_runs(tmp_path) == [] and failures.load_runs(tmp_path / "nothing") == []


def test_load_runs_gives_the_stacks_by_rank(tmp_path, recorded):
    run = recorded["hang-rank1"]
    (tmp_path / "hang").mkdir()
    (tmp_path / "hang" / "output.log").write_text(run.output)
    (tmp_path / "hang" / "truth.json").write_text(json.dumps(run.truth))
    (tmp_path / "hang" / "stacks.json").write_text(json.dumps({"0": "dump of rank 0"}))
    assert failures.load_runs(tmp_path)[0].stacks == {0: "dump of rank 0"}


def test_provoke_refuses_an_unknown_fault(tmp_path):
    with pytest.raises(ValueError, match="fault 'segfault' is not one of never-joins, hang"):
        failures.provoke("segfault", tmp_path)


def test_the_broken_script_has_every_problem():
    problems = failures.batch_script_problems(failures.BROKEN_BATCH_SCRIPT)
    assert [p.split(":")[0] for p in problems] == [
        "line 7",
        "line 11",
        "line 12",
        "line 13",
        "no --time among the #SBATCH lines sbatch reads",
    ]
    assert "sbatch ignores it" in problems[0] and "EADDRINUSE" in problems[1]
    assert "RANK, LOCAL_RANK, WORLD_SIZE set in the batch script" in problems[2]
    assert "start it with srun" in problems[3]


def test_the_courses_scripts_have_none():
    from course_utils.paths import REPO_ROOT

    for name in ("ddp_srun.sh", "ddp_torchrun.sh", "cpu_job.sh", "stacks.sh"):
        assert failures.batch_script_problems((REPO_ROOT / "slurm" / name).read_text()) == []


def test_patched_environ_sets_removes_and_restores(monkeypatch):
    monkeypatch.setenv("COURSE_TEST_KEEP", "old")
    monkeypatch.delenv("COURSE_TEST_NEW", raising=False)
    with environment.patched_environ(COURSE_TEST_KEEP=None, COURSE_TEST_NEW="1"):
        assert "COURSE_TEST_KEEP" not in os.environ and os.environ["COURSE_TEST_NEW"] == "1"
    assert os.environ["COURSE_TEST_KEEP"] == "old" and "COURSE_TEST_NEW" not in os.environ


def test_run_ranks_refuses_bad_arguments():
    with pytest.raises(ValueError, match="world_size=0 must be >= 1"):
        launching.run_ranks(print, world_size=0)


def test_run_ranks_refuses_to_fork_after_cuda_was_initialized(monkeypatch):
    # the CUDA notes: a forked child cannot re-initialize CUDA; injected, no GPU needed
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="already initialized CUDA.*distributed.launch"):
        launching.run_ranks(print, world_size=2)
