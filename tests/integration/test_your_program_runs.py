"""course_utils.jobs.your_program in a real process: it becomes the learner's program."""

import os
import subprocess
import sys

from slurm_task import SLURM_TASK


def test_the_program_runs_with_its_arguments_in_place(tmp_path):
    script = tmp_path / "show.py"
    script.write_text(
        "import os, sys\nprint(os.environ['RANK'], os.environ['SLURM_PROCID'], sys.argv[1:])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RANK"))}
    done = subprocess.run(
        [sys.executable, "-m", "course_utils.jobs.your_program", str(script), "--lr", "0.1"],
        env={**env, **SLURM_TASK},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3 3 ['--lr', '0.1']"


def test_torchvision_loads_the_standin_only_through_the_course_launcher(tmp_path):
    from course_utils.synthetic import write_standin

    write_standin(tmp_path / "data", train_size=20, test_size=10)
    (tmp_path / "train.py").write_text(
        "from torchvision.datasets import CIFAR10\n"
        "print(len(CIFAR10(root='./data', train=True, download=False)))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RANK"))}

    def run(*cmd):
        return subprocess.run(
            [sys.executable, *cmd],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    plain = run("train.py")
    assert plain.returncode == 1 and "Dataset not found or corrupted" in plain.stderr
    ours = run("-m", "course_utils.jobs.your_program", "train.py")
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.strip() == "20" and "synthetic CIFAR-10 stand-in" in ours.stderr
