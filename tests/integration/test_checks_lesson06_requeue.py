"""Exercise 06.4 checked for real: the learner's function starts the resumable program with the
check's seed and steps, signals it as Slurm would, starts it again; the check reads the records
and the final checkpoint those runs left, and trains the same run itself to compare."""

import os
import signal
import subprocess
import sys

from course_utils import processes
from course_utils.grading import run_check

ARGS = ["--epochs", "3", "--save-every", "3", "--step-delay", "0.05"]


def _command(folder, seed, steps):
    program = [sys.executable, "-m", "course_utils.jobs.resumable_train"]
    return program + ["--ckpt-dir", str(folder), "--seed", str(seed), "--max-steps", str(steps)]


def _no_slurm():
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


def _signalled(folder, seed, steps, sig):
    command = _command(folder, seed, steps) + ARGS
    with processes.started(command, env=_no_slurm(), stdout=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            if line.startswith("step 5 "):
                proc.send_signal(sig)
                break
        proc.communicate(timeout=120)
    processes.run(command, timeout=120, env=_no_slurm())


def test_the_reference_answer_passes_at_the_checks_own_draw():
    result = run_check(
        "06.4", lambda folder, seed, steps: _signalled(folder, seed, steps, signal.SIGUSR1)
    )
    assert result.passed, result.message


def test_a_kill_without_warning_is_no_preemption_handled():
    result = run_check(
        "06.4", lambda folder, seed, steps: _signalled(folder, seed, steps, signal.SIGKILL)
    )
    assert result.verdict == "failed"
    assert result.message.startswith(
        "expected a run stopped by a signal (SIGUSR1, as Slurm sends) that saved and exited, "
        "got runs start@0, start@"
    ), result.message


def test_runs_at_settings_of_ones_own_fail():
    """Issue 30: the runs are real, but at a seed of the learner's choosing, for which a record
    could be kept ready; the check draws its own."""
    result = run_check(
        "06.4",
        lambda folder, seed, steps: _signalled(folder, 0, 24, signal.SIGUSR1),
        seed=7,
        steps=18,
    )
    assert result.message.startswith(
        "expected runs with --seed 7 --max-steps 18 --epochs 3 (what the check gave), got a run "
        "with {'seed': 0, 'max_steps': 24, 'epochs': 3}"
    ), result.message
