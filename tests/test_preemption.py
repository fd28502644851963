"""course_utils.fault_tolerance.preemption: the signal flag and the Slurm requeue call."""

import os
import signal

import pytest

from course_utils import processes
from course_utils.fault_tolerance.preemption import PreemptionFlag, requeue_job


def test_flag_catches_usr1_and_term_and_restores_handlers():
    before = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGTERM)}
    for sig in (signal.SIGUSR1, signal.SIGTERM):
        with PreemptionFlag() as flag:
            assert not flag.requested and not flag.should_stop() and flag.name == "none"
            os.kill(os.getpid(), sig)  # delivered to the main thread before kill returns
            assert flag.requested and flag.should_stop() and flag.name == sig.name
    assert {s: signal.getsignal(s) for s in before} == before


def test_the_first_signal_stays_the_reason_when_the_requeue_brings_sigterm():
    # Under Slurm, `scontrol requeue` after SIGUSR1 makes the step get SIGTERM before the log line.
    with PreemptionFlag() as flag:
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGTERM)
        assert flag.name == "SIGUSR1"


def test_requeue_outside_slurm_does_nothing(fake_commands):
    fake = fake_commands({})
    assert requeue_job(environ={}) is False
    assert fake.calls == []


def test_requeue_calls_scontrol_with_the_job_id(fake_commands):
    fake = fake_commands({"scontrol requeue": ""})
    assert requeue_job(environ={"SLURM_JOB_ID": "4242"}) is True
    assert fake.calls == [("scontrol", "requeue", "4242")]


def test_requeue_failure_names_the_job_and_the_fix(fake_commands):
    refused = "Requested operation is presently disabled\n"
    fake_commands({"scontrol requeue": processes.Finished(("scontrol",), 1, "", refused, 0.1)})
    with pytest.raises(
        RuntimeError, match=r"scontrol requeue 7 failed \(exit code 1\): Requested .*--requeue"
    ):
        requeue_job(environ={"SLURM_JOB_ID": "7"})
