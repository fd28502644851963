"""Exercise 00.1's rules for a batch script, as sbatch and bash read it: a header sbatch accepts
that asks for what the documentation's interactive session asked for, and a body that sets the
environment up and runs `course doctor` without an interactive shell. lesson00.py applies them
to the learner's script before their job runs.
"""

import shlex

from course_utils import sbatch
from course_utils.grading import CheckFailed, expect

# The documentation's interactive session that exercise 00.1 turns into a batch job.
SESSION = "srun -p alpha --gres=gpu:1 -n 1 -c 7 --pty --mem-per-cpu=800 bash"
ACTIVATES = ("module load", "source ", ". ", "conda activate", "course_activate")


def command_lines(script: str) -> list[str]:
    """The script's command lines after its #SBATCH header (comments and blank lines left out)."""
    lines = [line.strip() for line in script.strip().splitlines()[1:]]
    return [line for line in lines if line and not line.startswith("#")]


def words(command: str) -> list[str]:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:  # an unclosed quote: bash would fail on it, the check reads plain words
        words = command.split()
    return words[1:] if words[:1] == ["srun"] else words  # `srun course doctor` counts too


def read_request(script: str) -> sbatch.Request:
    try:
        return sbatch.read_request(script)
    except ValueError as e:
        raise CheckFailed(f"expected a header sbatch can read, got: {e}") from None


def check_header(script: str, partition: str | None = "alpha") -> None:
    """The header asks for the session's resources, on `partition` (None: whichever the job
    was sent to: a script run on this cluster names its own)."""
    first = script.strip().splitlines()[0] if script.strip() else ""
    expect(
        first.startswith("#!"),
        "a first line such as #!/bin/bash (sbatch refuses a script without one)",
        repr(first) if first else "an empty script",
    )
    lines = [line.strip() for line in script.strip().splitlines()[1:] if line.strip()]
    first_command = next((i for i, line in enumerate(lines) if not line.startswith("#")), None)
    late = [line for line in lines[first_command or len(lines) :] if line.startswith("#SBATCH")]
    expect(
        not late,
        "every #SBATCH line before the first command (sbatch stops reading options there)",
        f"{late[0]!r} after one" if late else "",
    )
    request, session = read_request(script), f"the session `{SESSION}`"
    options = request.options
    expect(
        "--pty" not in options,
        "no --pty (srun's option for an interactive shell; sbatch has none)",
        "#SBATCH --pty",
    )
    if partition is not None:
        expect(
            options.get("--partition") == partition,
            f"--partition={partition} (-p {partition})",
            options.get("--partition", "no partition"),
            session,
        )
    expect(request.tasks in (None, 1), "one task (-n 1)", f"{request.tasks} tasks", session)
    expect(
        request.gpus_per_node == 1,
        "one GPU (--gres=gpu:1)",
        f"{request.gpus_per_node} GPU(s)",
        session,
    )
    expect(
        request.cpus_per_task == 7,
        "7 CPUs per task (-c 7)",
        f"{request.cpus_per_task} CPU(s) per task",
        session,
    )
    mem = request.mem_mb
    expect(
        mem is not None and abs(mem - 5600) < 1,
        "5600 MB in all (--mem-per-cpu=800 for 7 CPUs, or --mem=5600M)",
        "no memory request" if mem is None else f"{mem:.0f} MB",
        session,
    )
    minutes = request.minutes
    expect(
        minutes is not None and 0 < minutes <= 10,
        "--time of at most 10 minutes (without one, the job gets the partition's default "
        "limit, often days, and waits longer for a slot)",
        "no --time" if minutes is None else f"--time={options['--time']}",
    )


def check_body(script: str) -> None:
    commands = command_lines(script)
    runs_doctor = [i for i, c in enumerate(commands) if words(c)[:2] == ["course", "doctor"]]
    expect(
        bool(runs_doctor),
        "a line that runs `course doctor`",
        f"the commands {commands}" if commands else "no commands after the header",
    )
    before = commands[: runs_doctor[0]]
    expect(
        any(c.startswith(ACTIVATES) for c in before),
        "the environment activated before `course doctor` (module load ..., source "
        ".../bin/activate): `course` is on PATH only then",
        f"{before or 'nothing'} before it",
    )
    python = [c for c in before if words(c)[:1] in (["python"], ["python3"])]
    expect(
        not python,
        "`course doctor` before any python command, so a broken environment stops the job first",
        f"{python[0]!r} before it" if python else "",
    )
    shells = [c for c in commands if words(c) == ["bash"]]
    expect(
        not shells,
        "no interactive shell in a batch job",
        f"the line {shells[0]!r}" if shells else "",
    )
