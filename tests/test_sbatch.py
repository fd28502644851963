"""course_utils.sbatch: headers read as sbatch reads them."""

import pytest

from course_utils import sbatch
from course_utils.paths import REPO_ROOT


def test_reads_long_short_and_spaced_options_until_the_first_command():
    script = """#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=4
#SBATCH -c 8
#SBATCH --gres=gpu:a100:4   # four per node
#SBATCH --time 1-02:30:00
#SBATCH --mem=64G
#SBATCH --requeue
# a comment
srun python train.py
#SBATCH --time=00:05:00
"""
    request = sbatch.read_request(script)
    assert (request.nodes, request.tasks, request.tasks_per_node) == (2, 8, 4)
    assert (request.cpus_per_task, request.gpus_per_node) == (8, 4)
    assert request.minutes == 1 * 1440 + 2 * 60 + 30  # the line after srun is not read
    assert request.mem_mb == 64 * 1024 and "--requeue" in request.options


@pytest.mark.parametrize(
    ("spec", "mins"),
    [
        ("90", 90),
        ("5:30", 5.5),
        ("1:00:00", 60),
        ("2-0", 2880),
        ("1-1:30", 1530),
        ("0-00:15:00", 15),
    ],
)
def test_minutes(spec, mins):
    assert sbatch.minutes(spec) == mins


@pytest.mark.parametrize(("spec", "mb"), [("4000", 4000), ("500M", 500), ("8G", 8192)])
def test_memory(spec, mb):
    assert sbatch.memory_mb(spec) == mb


def test_bad_values_name_the_value_and_the_form():
    with pytest.raises(ValueError, match=r"--time='one hour' is not a Slurm time"):
        sbatch.minutes("one hour")
    with pytest.raises(ValueError, match=r"--mem='lots'"):
        sbatch.memory_mb("lots")


def test_gpus_per_task_count_per_node():
    assert sbatch.read_request("#SBATCH --ntasks=1\n#SBATCH --gpus-per-task=1").gpus_per_node == 1
    four = "#SBATCH --nodes=1\n#SBATCH --ntasks=4\n#SBATCH --gpus-per-task=1"
    assert sbatch.read_request(four).gpus_per_node == 4
    two_nodes = "#SBATCH -N 2\n#SBATCH --ntasks-per-node=2\n#SBATCH --gpus-per-task=1"
    assert sbatch.read_request(two_nodes).gpus_per_node == 2


def test_gpus_from_gres_gpus_per_node_and_gpus():
    assert sbatch.read_request("#SBATCH --gpus-per-node=2").gpus_per_node == 2
    assert sbatch.read_request("#SBATCH -N 2\n#SBATCH --gpus=4").gpus_per_node == 2
    assert sbatch.read_request("#SBATCH --gres=gpu").gpus_per_node == 1
    assert sbatch.read_request("#SBATCH --mem-per-cpu=2G -c 4").mem_mb == 8192


def test_every_course_script_states_its_time_and_reads_back():
    for path in (REPO_ROOT / "slurm").glob("*.sh"):
        if path.name in ("config.sh", "interactive.sh"):
            continue
        request = sbatch.read_request(path.read_text())
        assert request.minutes and request.minutes <= 120, path.name


@pytest.mark.parametrize(
    ("spec", "number", "seconds", "batch_shell"),
    [
        ("B:USR1@300", 10, 300, True),
        ("B:10@300", 10, 300, True),
        ("B:SIGUSR1@300", 10, 300, True),
        ("b:usr1@300", 10, 300, True),
        ("USR1", 10, 60, False),  # no time: 60 s; no B: every step, not the batch shell
        ("RB:TERM@5", 15, 5, True),
        ("B:USR2@", 12, 0, True),  # as Slurm's strtol reads an empty number
    ],
)
def test_signals_are_read_as_sbatch_reads_them(spec, number, seconds, batch_shell):
    sig = sbatch.parse_signal(spec)
    assert (sig.number, sig.seconds, sig.batch_shell) == (number, seconds, batch_shell)


@pytest.mark.parametrize("spec", ["B:FOO@1", "B:USR1@x", "B:USR1@70000", "", "B:0"])
def test_a_signal_sbatch_refuses_names_the_rule_and_the_fix(spec):
    with pytest.raises(
        ValueError, match=r"is not what sbatch reads: .*write e.g. --signal=B:USR1@120"
    ):
        sbatch.parse_signal(spec)
