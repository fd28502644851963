"""Reading lesson 10's batch scripts: their one srun line, as a launch on this machine, and the
rules a scaling job's script keeps (exercise 10.2's check applies them; run them on yours).

    scripts.srun_program(text, args, threads)    # ("course_utils.jobs.lab_train", [...])
    scripts.scaling_script_problems(text)         # [] for slurm/lab_scaling.sh
"""

from __future__ import annotations

import re
import shlex

from course_utils import hpc, sbatch

PROGRAM = "course_utils.jobs.lab_train"
# srun given the CPUs of each task, in the spellings that work
CPUS = (
    '-c "$SLURM_CPUS_PER_TASK"',
    "-c $SLURM_CPUS_PER_TASK",
    '--cpus-per-task="$SLURM_CPUS_PER_TASK"',
    "--cpus-per-task=$SLURM_CPUS_PER_TASK",
)


def srun_lines(script: str) -> list[str]:
    """The lines of a batch script that start with srun (comments and blank lines aside)."""
    return [
        line.strip()
        for line in script.splitlines()
        if line.strip().startswith("srun ") or line.strip() == "srun"
    ]


def _expand(word: str, args: list[str], variables: dict[str, str]) -> list[str]:
    if word == "$@":
        return list(args)
    for name, value in variables.items():
        word = word.replace(f"${{{name}}}", value).replace(f"${name}", value)
    if "$" in word:
        raise ValueError(
            f'the local launcher cannot expand {word!r} in the srun line: it knows "$@" and '
            f"{', '.join('$' + n for n in variables)}"
        )
    return [word]


def srun_program(script: str, args: list[str], threads: int) -> tuple[str, list[str]]:
    """(module, its arguments) of the one srun line's `python -m MODULE ...`, with "$@" as
    `args` and $SLURM_CPUS_PER_TASK as `threads`: what the local launcher starts per rank."""
    lines = srun_lines(script)
    if len(lines) != 1:
        raise ValueError(f"expected one srun line in the script, found {len(lines)}: {lines}")
    words = shlex.split(lines[0], comments=True)
    starts = [
        i
        for i, w in enumerate(words)
        if w in ("python", "python3") or w.endswith(("/python", "/python3"))
    ]
    if not starts or words[starts[0] + 1 : starts[0] + 2] != ["-m"] or len(words) < starts[0] + 3:
        raise ValueError(
            f"the srun line {lines[0]!r} does not start `python -m MODULE ...`: the lab's "
            'program runs as a module (python -m course_utils.jobs.lab_train "$@")'
        )
    variables = {"SLURM_CPUS_PER_TASK": str(threads)}
    rest = [x for w in words[starts[0] + 3 :] for x in _expand(w, args, variables)]
    return words[starts[0] + 2], rest


def header_problems(text: str) -> list[str]:
    """The header: one task of a GPU's CPUs (the set's sizes come from sbatch's options), one
    GPU per task, at most 15 minutes, a log per job."""
    try:
        r = sbatch.read_request(text)
    except ValueError as e:
        return [f"a header sbatch can read, got: {e}"]
    o, problems = r.options, []
    if (r.nodes, r.tasks) != (1, 1):
        problems.append(
            f"--nodes=1 and --ntasks=1 (the set's sbatch options give the other "
            f"sizes), got {r.nodes} node(s) and {r.tasks} task(s)"
        )
    if r.cpus_per_task != hpc.CPUS_PER_GPU:
        problems.append(
            f"--cpus-per-task={hpc.CPUS_PER_GPU} (a GPU's bundle), got {r.cpus_per_task}"
        )
    if o.get("--gpus-per-task") != "1":
        problems.append(f"--gpus-per-task=1 in the header, got {o.get('--gpus-per-task')}")
    if r.minutes is None or not 0 < r.minutes <= 15:
        problems.append(f"a --time of at most 15 minutes, got {o.get('--time')}")
    if "%j" not in o.get("--output", ""):
        problems.append(
            f"an --output with %j (each job of the set its own log), got {o.get('--output')}"
        )
    return problems


def gpu_bind_problems(body: str) -> list[str]:
    """An explicit --gpu-bind other than per_task: it overrides the binding --gpus-per-task=1
    implies (Slurm 21.08 and newer: each task bound to one GPU of its own)."""
    binds = re.findall(r"--gpu-bind[= ]\s*(\S+)", body)
    wrong = [b.strip("'\"") for b in binds if not b.strip("'\"").startswith("per_task")]
    if not wrong:
        return []
    return [
        f"no --gpu-bind={wrong[0]}: --gpus-per-task=1 already binds each task to one GPU of its "
        "own (Slurm's per_task binding), and an explicit --gpu-bind overrides that (closest may "
        "give a task every GPU of its NUMA domain), got --gpu-bind=" + wrong[0]
    ]


def body_problems(text: str) -> list[str]:
    """The body: the site settings, and one srun line that gives each task its CPUs and starts
    the lab's program with the script's arguments; its tasks keep the per-task GPU binding the
    job's --gpus-per-task=1 implies (no --gpu-bind that overrides it)."""
    lines = srun_lines(text)
    if len(lines) != 1:
        return [f"one srun line, got {len(lines)}"]  # the rule of every script in slurm/
    srun, problems = lines[0], []
    if not any(c in srun for c in CPUS):
        problems.append(f'srun given the CPUs per task (-c "$SLURM_CPUS_PER_TASK"), got {srun!r}')
    body = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    problems += gpu_bind_problems(body)
    if not any(
        line.strip().startswith("source") and "config.sh" in line for line in text.splitlines()
    ):
        problems.append("the site settings sourced from slurm/config.sh, got no such line")
    try:
        module, args = srun_program(text, ["ARGS"], 1)
    except ValueError as e:
        return [*problems, str(e)]
    if module != PROGRAM or "ARGS" not in args:
        problems.append(f'srun starting python -m {PROGRAM} "$@", got {module} {args}')
    return problems


def scaling_script_problems(text: str) -> list[str]:
    """What keeps `text` from being lesson 10's scaling script, each as "X, got Y"."""
    return header_problems(text) + body_problems(text)
