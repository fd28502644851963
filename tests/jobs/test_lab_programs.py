"""course_utils.jobs.lab_train and lab_staging: options and the pieces that need no process
group (runs: tests/integration/test_lab_local.py, test_lab_slurm.py)."""

import pytest

from course_utils.jobs import lab_staging, lab_train


def test_a_sweep_task_picks_its_learning_rate(monkeypatch, tmp_path):
    base = ["--data", str(tmp_path), "--out", str(tmp_path)]
    args = lab_train.parse_args([*base, "--lrs", "0.02,0.1,0.3", "--index", "2"])
    assert (args.lr, args.study) == (0.3, "sweep")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")  # an array task, as sbatch --array sets it
    assert lab_train.parse_args([*base, "--lrs", "0.02,0.1,0.3"]).lr == 0.1
    assert lab_train.parse_args(base).study == "scaling"


def test_a_sweep_task_outside_the_values_is_refused(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    with pytest.raises(SystemExit):
        lab_train.parse_args(["--data", str(tmp_path), "--out", str(tmp_path), "--lrs", "0.1"])
    assert "--lrs has 1 values: pass --index 0..0" in capsys.readouterr().err


class _Sampler:
    def __init__(self):
        self.epochs = []

    def set_epoch(self, epoch):
        self.epochs.append(epoch)


def test_batches_start_a_new_epoch_when_the_loader_runs_out():
    sampler = _Sampler()
    got = list(lab_train.batches(["a", "b", "c"], sampler, 7))
    assert got == ["a", "b", "c", "a", "b", "c", "a"] and sampler.epochs == [0, 1, 2]


def test_only_a_folder_of_this_jobs_under_the_base_is_removed(tmp_path):
    environ = {"SLURM_JOB_ID": "77", "TMPDIR": str(tmp_path)}
    assert lab_staging.ours_to_remove(tmp_path / "lab-77" / "cn1", environ)
    assert not lab_staging.ours_to_remove(tmp_path, environ)  # the base itself
    assert not lab_staging.ours_to_remove(tmp_path / "shared" / "cn1", environ)  # no job id
    assert not lab_staging.ours_to_remove(tmp_path.parent / "lab-77", environ)  # outside
    assert not lab_staging.ours_to_remove(tmp_path / "lab-177" / "cn1", environ)  # job 177's


def test_a_job_id_in_the_base_s_own_path_makes_nothing_under_it_ours(tmp_path):
    """A base whose path holds the id (as pytest-277 holds 77) gives no folder under it away."""
    base = tmp_path / "scratch-77"
    environ = {"SLURM_JOB_ID": "77", "TMPDIR": str(base)}
    assert not lab_staging.ours_to_remove(base / "shared" / "cn1", environ)
    assert lab_staging.ours_to_remove(base / "course-lab-77" / "cn1", environ)


def test_a_folder_names_a_job_by_its_whole_id():
    assert lab_staging.names_job("course-lab-77", "77")
    assert not lab_staging.names_job("course-lab-177", "77")
    assert not lab_staging.names_job("course-lab-770", "77")
    assert not lab_staging.names_job("course-lab-77", "")  # outside a job: nothing is its own
