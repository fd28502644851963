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


COURSE = cluster.SCRIPTS["scaling"].read_text()
SRUN = 'srun --kill-on-bad-exit=1 -c "$SLURM_CPUS_PER_TASK"'
PER_TASK = COURSE.replace("#SBATCH --gpus-per-node=1", "#SBATCH --gpus-per-task=1")


def with_srun(text, words):
    return text.replace(SRUN, f"{SRUN} {words}")


def test_the_course_scripts_ask_a_gpu_per_task_per_node_and_no_binding():
    for name in ("scaling", "sweep"):
        text = cluster.SCRIPTS[name].read_text()
        code = "\n".join(line for line in text.splitlines() if not line.startswith("# "))
        assert "--gpu-bind" not in code and "--gpus-per-task" not in code, name
        assert "#SBATCH --gpus-per-node=1" in text and scripts.gpu_problems(text) == [], name


def test_gpus_per_task_alone_is_refused_and_says_why():
    (problem,) = scripts.scaling_script_problems(PER_TASK)
    assert problem.startswith("--gpus-per-node=1 (a GPU per task; the study gives")
    assert "ConstrainDevices=yes" in problem and "CUDA IPC" in problem
    assert problem.endswith("got --gpus-per-task=1 alone")


@pytest.mark.parametrize(
    "fixed",
    [
        with_srun(PER_TASK, "--gpu-bind=none"),
        with_srun(PER_TASK, "--gpu-bind=verbose,none"),
        with_srun(PER_TASK, "--gres-flags=allow-task-sharing"),
        PER_TASK.replace(
            "#SBATCH --gpus-per-task=1", "#SBATCH --gpus-per-task=1\n#SBATCH --gpu-bind=none"
        ),
    ],
)
def test_gpus_per_task_with_a_fix_is_accepted(fixed):
    assert scripts.scaling_script_problems(fixed) == []


@pytest.mark.parametrize("bind", ["closest", "map_gpu:0,1", "per_task:1", "'closest'"])
def test_a_binding_that_confines_each_task_to_its_gpus_is_refused(bind):
    (problem,) = scripts.gpu_problems(with_srun(COURSE, f"--gpu-bind={bind}"))
    assert problem.startswith(f"no --gpu-bind={bind.strip(chr(39))}: a binding gives each task")
    assert scripts.gpu_problems(COURSE + "# srun --gpu-bind=closest is wrong\n") == []


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("#SBATCH --gpus-per-node=1\n", "", "--gpus-per-node=1 in the header (a GPU per task"),
        ("--gpus-per-node=1", "--gpus-per-node=2", "got --gpus-per-node=2"),
        ("--gpus-per-node=1", "--gpus=1", "got --gpus=1"),
        (
            "#SBATCH --gpus-per-node=1",
            "#SBATCH --gres-flags=allow-task-sharing\n#SBATCH --gpus-per-task=1",
            "--gres-flags=allow-task-sharing on the srun line",
        ),
    ],
)
def test_gpu_requests_other_than_a_gpu_per_task(old, new, message):
    problems = scripts.gpu_problems(COURSE.replace(old, new))
    assert problems and message in problems[0], problems


def test_gres_per_node_counts_as_a_gpu_per_task():
    gres = COURSE.replace("--gpus-per-node=1", "--gres=gpu:1")
    assert scripts.gpu_problems(gres) == []
    assert scripts.gpu_options(gres, 4) == ("--gres=gpu:4",)


def test_the_study_sizes_the_gpu_request_per_shape():
    assert scripts.gpu_options(COURSE, 2) == ("--gpus-per-node=2",)
    typed = COURSE.replace("--gpus-per-node=1", "--gpus-per-node=a100:1")
    assert scripts.gpu_options(typed, 4) == ("--gpus-per-node=a100:4",)
    assert scripts.gpu_options(PER_TASK, 4) == ()  # per task scales with the tasks itself
    assert scripts.gpu_options(scripts.cpu_variant(COURSE), 2) == ()


def test_the_cpu_variant_asks_for_no_gpu_at_all():
    """A cluster without GresTypes=gpu may refuse any GPU option, even --gpus-per-node=0."""
    fixed = with_srun(PER_TASK, "--gpu-bind=none --gres-flags=allow-task-sharing")
    for text in (COURSE, fixed, COURSE.replace("--gpus-per-node=1", "--gres=gpu:1")):
        cpu = scripts.cpu_variant(text)
        code = [line for line in cpu.splitlines() if not line.startswith("# ")]
        assert not any(w in line for line in code for w in ("--gpu", "--gres")), cpu
        assert scripts.header_problems(cpu) == scripts.body_problems(cpu) == []
    assert "#SBATCH --mem-per-cpu=1G" in scripts.cpu_variant(COURSE)


def test_the_header_asks_for_memory_and_leaves_name_and_log_to_the_study():
    no_memory = COURSE.replace("#SBATCH --mem-per-cpu=1G\n", "")
    assert scripts.header_problems(no_memory) == [
        "memory asked for (--mem-per-cpu=1G, or --mem: sacct's memory efficiency is the peak "
        "over what the job asked for), got none"
    ]
    assert scripts.header_problems(no_memory + "#SBATCH --mem=4G\n") != []  # after a command
    bare = COURSE.replace("#SBATCH --output=%x-%j.out\n", "").replace(
        "#SBATCH --job-name=lab-scaling\n", ""
    )
    assert scripts.scaling_script_problems(bare) == []


@pytest.mark.parametrize("device", ["", "cpu"])
def test_the_study_submits_a_gpu_per_task_or_the_cpu_variant(
    fake_commands, tmp_path, monkeypatch, device
):
    monkeypatch.setenv("COURSE_DEVICE", device)
    monkeypatch.setattr(cluster.batch, "POLL", 0.0)
    monkeypatch.setattr(cluster.batch.accounting, "SETTLE_WAIT", 0.0)
    script = tmp_path / "lab_scaling_yours.sh"
    script.write_text(COURSE)
    fake = fake_commands({"sbatch": "12\n", "squeue": "", "sacct": "", "scontrol": ""})
    launcher = cluster.batch.Launcher("slurm", "the test says so")
    cluster.scaling(launcher, tmp_path, tmp_path, [cluster.Shape(2, 2)], script=script)
    (sbatch,) = [c for c in fake.calls if c[0] == "sbatch"]
    sizes = ("--nodes=2", "--ntasks=4", "--ntasks-per-node=2")
    assert all(s in sbatch for s in sizes)
    submitted = next(w for w in sbatch if w.endswith(".sh"))
    if device == "cpu":
        assert not any(w.startswith(("--gpu", "--gres")) for w in sbatch)
        assert submitted.endswith("-cpu.sh")
        assert open(submitted).read() == scripts.cpu_variant(COURSE)
    else:
        assert "--gpus-per-node=2" in sbatch and submitted == str(script)
    log = (tmp_path / "logs" / "2x2.log").read_text()
    assert log.startswith("COURSE_DEVICE=cpu: submitted") == (device == "cpu")
