"""Reading lesson 10's batch scripts: their one srun line, as a launch on this machine, and the
rules a scaling job's script keeps (exercise 10.2's check applies them; run them on yours).

    scripts.srun_program(text, args, threads)    # ("course_utils.jobs.lab_train", [...])
    scripts.scaling_script_problems(text)         # [] for slurm/lab_scaling.sh
    scripts.gpu_options(text, per_node=2)         # ("--gpus-per-node=2",): a GPU per task
    scripts.cpu_variant(text)                     # the same script asking for no GPU

Where Slurm confines devices, a task bound to its own GPU (`--gpus-per-task` alone) cannot
reach its neighbours' GPUs, and NCCL fails within a node (`device.plan_ranks` says so at run
time): the scripts ask `--gpus-per-node` with a task per GPU, or `--gpus-per-task` with
`--gpu-bind=none` or srun's `--gres-flags=allow-task-sharing`.
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
    """The header: one task of a GPU's CPUs (the set's sizes come from sbatch's options), memory
    (the lab reads each job's memory efficiency against it), at most 15 minutes. The job's name
    and log are the study's to give (`batch.submit` names each job for the script's digest and
    collects its log), so the header need not say them."""
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
    if not any(o.get(m) for m in MEMORY):
        problems.append(
            "memory asked for (--mem-per-cpu=1G, or --mem: sacct's memory efficiency is the "
            "peak over what the job asked for), got none"
        )
    if r.minutes is None or not 0 < r.minutes <= 15:
        problems.append(f"a --time of at most 15 minutes, got {o.get('--time')}")
    return problems


# ---- the GPUs: a task per GPU, and every task able to reach its node's GPUs ------------------

MEMORY = ("--mem", "--mem-per-cpu", "--mem-per-gpu")
PER_NODE = ("--gpus-per-node", "--gres")  # GPUs counted per node: the study sizes them per shape
CONFINED = (
    "where Slurm confines devices (ConstrainDevices=yes, usual at GPU centres) a task bound to "
    "GPUs of its own cannot reach its neighbours' over CUDA IPC, and NCCL's path within the "
    "node fails with it"
)


def _code(text: str) -> str:
    """The script without its comments (an #SBATCH line is an option, not a comment)."""
    return "\n".join(
        line if line.lstrip().startswith("#SBATCH") else line.split("#", 1)[0]
        for line in text.splitlines()
    )


def gpu_binds(text: str) -> list[str]:
    """The --gpu-bind values the header and the srun line give (`verbose,` aside)."""
    binds = re.findall(r"--gpu-bind[= ]\s*(\S+)", _code(text))
    return [b.strip("'\"").removeprefix("verbose,") for b in binds]


def shares_tasks_gpus(text: str) -> bool:
    """srun --gres-flags=allow-task-sharing: every task may use the job's GPUs on its node."""
    return any("allow-task-sharing" in line for line in srun_lines(_code(text)))


def gpu_problems(text: str) -> list[str]:
    """A task per GPU that can reach its node's GPUs: `--gpus-per-node=1` for the header's one
    task (the study gives --gpus-per-node=N with N tasks per node); `--gpus-per-task=1` only with
    --gpu-bind=none or srun's --gres-flags=allow-task-sharing; no other --gpu-bind."""
    try:
        o = sbatch.parse_header(text)
    except ValueError:
        return []  # header_problems says it
    asked = {k: v for k, v in o.items() if k in (*PER_NODE, "--gpus-per-task", "--gpus")}
    binds, problems = gpu_binds(text), []
    if any("allow-task-sharing" in v for v in o.values()):
        problems.append(
            "--gres-flags=allow-task-sharing on the srun line (the option is srun's: in the "
            "header it does not reach the tasks), got it in the header"
        )
    for bind in binds:
        if bind != "none":
            problems.append(
                f"no --gpu-bind={bind}: a binding gives each task GPUs of its own, and {CONFINED}"
                f" (only --gpu-bind=none, which undoes it, is kept), got --gpu-bind={bind}"
            )
    if list(asked) == ["--gpus-per-task"]:
        if asked["--gpus-per-task"] != "1":
            problems.append(f"--gpus-per-task=1, got --gpus-per-task={asked['--gpus-per-task']}")
        elif "none" not in binds and not shares_tasks_gpus(text):
            problems.append(
                "--gpus-per-node=1 (a GPU per task; the study gives --gpus-per-node=N with N "
                "tasks per node), or --gpus-per-task=1 with srun --gpu-bind=none or "
                "--gres-flags=allow-task-sharing (Slurm 23.11 and later): --gpus-per-task alone "
                f"binds each task to its own GPU, and {CONFINED}, got --gpus-per-task=1 alone"
            )
        return problems
    per_node = [sbatch.gpus_in(v if k == "--gres" else f"gpu:{v}") for k, v in asked.items()]
    if len(asked) != 1 or list(asked)[0] not in PER_NODE or per_node != [1]:
        got = " ".join(f"{k}={v}" for k, v in asked.items()) or "no GPU request"
        problems.append(
            "--gpus-per-node=1 in the header (a GPU per task for its one task; the study gives "
            f"--gpus-per-node=N with N tasks per node), got {got}"
        )
    return problems


def gpu_options(text: str, per_node: int) -> tuple[str, ...]:
    """sbatch options that size a script's GPU request for `per_node` tasks per node: its
    per-node request (--gpus-per-node, --gres=gpu) times the tasks; --gpus-per-task scales by
    itself; a script that asks for no GPU gets none."""
    try:
        o = sbatch.parse_header(text)
    except ValueError:
        return ()
    if "--gpus-per-node" in o:
        kind = o["--gpus-per-node"].rpartition(":")[0]
        count = sbatch.gpus_in(f"gpu:{o['--gpus-per-node']}") * per_node
        return (f"--gpus-per-node={kind + ':' if kind else ''}{count}",)
    if sbatch.gpus_in(o.get("--gres", "")):
        return (f"--gres=gpu:{sbatch.gpus_in(o['--gres']) * per_node}",)
    return ()


GPU_WORDS = re.compile(
    r"\s(--(gpus-per-node|gpus-per-task|gpus|gpu-bind|gres-flags)[= ]\s*\S+"
    r"|--gres[= ]\s*gpu\S*|-G\s*\S+)"
)


def cpu_variant(text: str) -> str:
    """The script with every GPU option left out (the #SBATCH lines that ask for GPUs, srun's
    GPU words): a CPU run asks for no GPU at all, since a cluster without GPUs configured
    (no GresTypes=gpu) may refuse even --gpus-per-node=0."""
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith("#SBATCH") and GPU_WORDS.search(
            " " + line.split("#SBATCH", 1)[1]
        ):
            continue
        if line.lstrip().startswith("srun"):
            line = GPU_WORDS.sub("", line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def body_problems(text: str) -> list[str]:
    """The body: the site settings, and one srun line that gives each task its CPUs and starts
    the lab's program with the script's arguments."""
    lines = srun_lines(text)
    if len(lines) != 1:
        return [f"one srun line, got {len(lines)}"]  # the rule of every script in slurm/
    srun, problems = lines[0], []
    if not any(c in srun for c in CPUS):
        problems.append(f'srun given the CPUs per task (-c "$SLURM_CPUS_PER_TASK"), got {srun!r}')
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
    return header_problems(text) + gpu_problems(text) + body_problems(text)
