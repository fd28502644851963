"""Exercise 06.4 checked for real: the learner's function starts the resumable program, signals it
as Slurm would, starts it again; the check reads the records and checkpoints those runs left."""

import os
import signal
import subprocess
import sys

from course_utils import processes
from course_utils.grading import run_check

ARGS = ["--epochs", "3", "--max-steps", "24", "--save-every", "3", "--step-delay", "0.05"]


def _command(folder):
    return [sys.executable, "-m", "course_utils.jobs.resumable_train", "--ckpt-dir", str(folder)]


def _no_slurm():
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


def _signalled(folder, sig):
    command = _command(folder) + ARGS
    with processes.started(command, env=_no_slurm(), stdout=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            if line.startswith("step 5 "):
                proc.send_signal(sig)
                break
        proc.communicate(timeout=120)
    processes.run(command, timeout=120, env=_no_slurm())


def test_the_reference_answer_passes():
    result = run_check("06.4", lambda folder: _signalled(folder, signal.SIGUSR1))
    assert result.passed, result.message


def test_a_kill_without_warning_is_no_preemption_handled():
    result = run_check("06.4", lambda folder: _signalled(folder, signal.SIGKILL))
    assert result.verdict == "failed"
    assert result.message.startswith(
        "expected a run stopped by a signal (SIGUSR1, as Slurm sends) that saved and exited, "
        "got runs start@0, start@"
    ), result.message
