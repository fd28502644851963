"""course_utils.jobs.with_ranks in a real process: it becomes the learner's program."""

import os
import subprocess
import sys

SLURM_TASK = {
    "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
    "SLURM_NTASKS": "4", "SLURM_NODEID": "1", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_JOB_NODELIST": "cn[1-2]",
}  # fmt: skip


def test_the_program_runs_with_its_arguments_in_place(tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import os, sys\nprint(os.environ['RANK'], os.environ['SLURM_PROCID'], "
                      "sys.argv[1:])\n")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RANK"))}
    done = subprocess.run(
        [sys.executable, "-m", "course_utils.jobs.with_ranks", str(script), "--lr", "0.1"],
        env={**env, **SLURM_TASK}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3 3 ['--lr', '0.1']"
