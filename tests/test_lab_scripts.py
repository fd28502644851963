"""lab_scripts: a batch script's srun line as a local launch, and the rules of lesson 10's
scaling script (exercise 10.2's check applies them; the course's own script keeps them)."""

import pytest

from course_utils.lab import cluster, scripts

SCRIPT = """#!/bin/bash
#SBATCH --ntasks=1
source "$COURSE_DIR/slurm/config.sh"
# srun python -m not.this.one
srun -c "$SLURM_CPUS_PER_TASK" python -m course_utils.jobs.lab_train --threads "${SLURM_CPUS_PER_TASK}" "$@"
"""  # noqa: E501


def test_the_srun_line_becomes_the_local_program():
    module, args = scripts.srun_program(SCRIPT, ["--data", "d", "--out", "o"], threads=2)
    assert module == "course_utils.jobs.lab_train"
    assert args == ["--threads", "2", "--data", "d", "--out", "o"]
    venv = SCRIPT.replace(" python ", " /opt/venv/bin/python3 ")
    assert scripts.srun_program(venv, [], 1)[0] == "course_utils.jobs.lab_train"


@pytest.mark.parametrize(
    "script, message",
    [
        ("#!/bin/bash\npython -m x\n", "expected one srun line in the script, found 0"),
        (SCRIPT + SCRIPT.splitlines()[-1] + "\n", "found 2"),
        (
            SCRIPT.replace("python -m course_utils.jobs.lab_train", "python train.py"),
            "does not start `python -m MODULE ...`",
        ),
        (SCRIPT.replace('"$@"', '"$DATA"'), "cannot expand '\\$DATA'"),
    ],
)
def test_srun_lines_the_local_launcher_cannot_run(script, message):
    with pytest.raises(ValueError, match=message):
        scripts.srun_program(script, [], 1)


def test_the_course_scripts_exist_for_each_step():
    assert sorted(cluster.SCRIPTS) == ["scaling", "staging", "sweep"]
    assert all(path.is_file() for path in cluster.SCRIPTS.values())
    text = cluster.SCRIPTS["scaling"].read_text()
    module, _ = scripts.srun_program(text, [], 1)
    assert module == scripts.PROGRAM


def test_the_course_scripts_keep_the_rules():
    assert scripts.scaling_script_problems(cluster.SCRIPTS["scaling"].read_text()) == []
    sweep = cluster.SCRIPTS["sweep"].read_text()  # an array: only the sizes of its header differ
    assert scripts.body_problems(sweep) == []


def test_each_rule_says_what_it_wanted_and_what_came():
    text = cluster.SCRIPTS["scaling"].read_text()
    no_config = text.replace('source "${COURSE_DIR', 'echo "${COURSE_DIR')
    assert scripts.body_problems(no_config) == [
        "the site settings sourced from slurm/config.sh, got no such line"
    ]
    assert scripts.header_problems("#SBATCH --time=forever\n") == [
        "a header sbatch can read, got: --time='forever' is not a Slurm time; write minutes, "
        "H:MM:SS or D-HH:MM:SS"
    ]
    two_sruns = text + "srun hostname\n"
    assert scripts.body_problems(two_sruns) == ["one srun line, got 2"]


@pytest.mark.parametrize("bind", ["closest", "none", "map_gpu:0,1", "'closest'"])
def test_an_explicit_gpu_bind_that_overrides_per_task_binding_is_refused(bind):
    """Slurm 21.08+: --gpus-per-task=1 implies --gpu-bind=per_task:1; an explicit --gpu-bind
    overrides it (srun.1, sbatch.1), and closest may give a task all GPUs of its NUMA domain."""
    text = (
        cluster.SCRIPTS["scaling"]
        .read_text()
        .replace(
            'srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK"',
            f'srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK" --gpu-bind={bind}',
        )
    )
    (problem,) = scripts.body_problems(text)
    assert problem.startswith(f"no --gpu-bind={bind.strip(chr(39))}: --gpus-per-task=1 already")
    per_task = text.replace(f"--gpu-bind={bind}", "--gpu-bind=per_task:1")
    assert scripts.body_problems(per_task) == []
    commented = cluster.SCRIPTS["scaling"].read_text() + "# srun --gpu-bind=closest is wrong\n"
    assert scripts.body_problems(commented) == []


def test_the_course_scripts_ask_no_gpu_binding_of_their_own():
    for name in ("scaling", "sweep"):
        text = cluster.SCRIPTS[name].read_text()
        body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
        assert "--gpu-bind" not in body and "--gpus-per-task" not in body, name
        assert "#SBATCH --gpus-per-task=1" in text  # the job asks; srun's tasks inherit it
