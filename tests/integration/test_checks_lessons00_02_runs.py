"""Exercises 00.1 and 00.4 checked for real: a batch script run as a job here, fresh Pythons
that import torch. (02.3, DataLoader workers: tests/integration/test_checks_lesson02_runs.py.)

Both checks start processes (the job; the imports), hence integration tests. The fast lane tests
the same verdicts on canned records (tests/grading/checks/test_lesson00.py). 00.4's passing run is
the solution's own, which `make test-solutions` grades on the same check: here only a wrong one.
"""

import time
from pathlib import Path

import pytest

from course_utils import batch, import_cost
from course_utils.grading import run_check


def doctor_job(partition, setup):
    return f"""#!/bin/bash
#SBATCH --job-name=doctor
#SBATCH --partition={partition}
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=7
#SBATCH --mem-per-cpu=800
#SBATCH --time=00:10:00
{setup}
course doctor
"""


def run_doctor_job(script, folder):
    path = Path(folder) / "doctor.sh"
    path.write_text(script)
    return batch.run_script(path, "doctor", logs=Path(folder))


def test_the_doctor_job_runs_here_and_its_report_is_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(batch.LAUNCHER_VARIABLE, "local")
    done = run_check("00.1", doctor_job, run_doctor_job)
    assert done.passed, done.message
    assert (tmp_path / "runs" / "00" / "doctor.sh").read_text().startswith("#!/bin/bash")


@pytest.mark.slurm
def test_the_doctor_job_on_slurm_is_held_against_sacct(tmp_path, monkeypatch):
    """Submitted to the test cluster; the check reads the scheduler's own record of it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(batch.LAUNCHER_VARIABLE, raising=False)
    done = run_check("00.1", doctor_job, run_doctor_job)
    assert done.passed, done.message
    assert list((tmp_path / "runs" / "00").glob("doctor-*.out"))


def test_import_cost_timed_in_this_process_fails(tmp_path, monkeypatch):
    def in_this_process(path):  # torch is imported here already: the import costs nothing
        samples = []
        for state in ("cold", "warm", "warm"):
            start = time.perf_counter()
            import torch  # noqa: F401

            seconds = time.perf_counter() - start
            samples.append({"state": state, "evicted_bytes": 1, "seconds": seconds, "pid": state})
        import_cost.save(import_cost.records(samples), path)

    monkeypatch.chdir(tmp_path)
    done = run_check("00.4", in_this_process)
    assert done.verdict == "failed"
    assert "each import in a fresh process of its own" in done.message
