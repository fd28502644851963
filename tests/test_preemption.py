"""course_utils.preemption: the signal flag and the Slurm requeue call."""

import os
import signal
import subprocess

import pytest

from course_utils.preemption import PreemptionFlag, requeue_job


def test_flag_catches_usr1_and_term_and_restores_handlers():
    before = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGTERM)}
    for sig in (signal.SIGUSR1, signal.SIGTERM):
        with PreemptionFlag() as flag:
            assert not flag.requested and not flag.should_stop() and flag.name == "none"
            os.kill(os.getpid(), sig)  # delivered to the main thread before kill returns
            assert flag.requested and flag.should_stop() and flag.name == sig.name
    assert {s: signal.getsignal(s) for s in before} == before


def fake_run(returncode, stderr=""):
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, returncode, "", stderr)

    return run, calls


def test_requeue_outside_slurm_does_nothing():
    run, calls = fake_run(0)
    assert requeue_job(environ={}, run=run) is False
    assert calls == []


def test_requeue_calls_scontrol_with_the_job_id():
    run, calls = fake_run(0)
    assert requeue_job(environ={"SLURM_JOB_ID": "4242"}, run=run) is True
    assert calls == [["scontrol", "requeue", "4242"]]


def test_requeue_failure_names_the_job_and_the_fix():
    run, _ = fake_run(1, "Requested operation is presently disabled")
    with pytest.raises(RuntimeError, match=r"scontrol requeue 7 failed \(1\).*#SBATCH --requeue"):
        requeue_job(environ={"SLURM_JOB_ID": "7"}, run=run)
