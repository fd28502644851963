"""Reading a batch script's #SBATCH header as Slurm does: options, times, memory, GPUs.

    request = sbatch.read_request(Path("slurm/ddp_srun.sh").read_text())
    request.tasks, request.gpus_per_node, request.minutes

Used by the exercises that have learners write or repair a header (lessons 00, 05, 09) and by
the tests that hold the course's own scripts to its rules. Like sbatch, it reads `#SBATCH` lines
until the first line that is neither a comment nor blank; long and short options, `--opt=value`
and `--opt value`, are normalized to the long name.
"""

from __future__ import annotations

import re
import shlex
import signal
from dataclasses import dataclass

SHORT = {
    "-A": "--account",
    "-c": "--cpus-per-task",
    "-G": "--gpus",
    "-J": "--job-name",
    "-N": "--nodes",
    "-n": "--ntasks",
    "-o": "--output",
    "-e": "--error",
    "-p": "--partition",
    "-t": "--time",
    "-q": "--qos",
}
FLAGS = {"--requeue", "--no-requeue", "--exclusive", "--overcommit", "--wait"}  # no value


def parse_header(script: str) -> dict[str, str]:
    """{long option: value} of the script's #SBATCH lines ("" for a flag); the last one wins."""
    options: dict[str, str] = {}
    for line in script.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break  # sbatch stops reading options at the first command
        if not stripped.startswith("#SBATCH"):
            continue
        words = shlex.split(stripped[len("#SBATCH") :], comments=True)
        while words:
            word = words.pop(0)
            name, _, value = word.partition("=")
            name = SHORT.get(name, name)
            if not name.startswith("--"):
                raise ValueError(f"#SBATCH {word!r}: not an option (options start with - or --)")
            if not value and name not in FLAGS and words and not words[0].startswith("-"):
                value = words.pop(0)
            options[name] = value
    return options


def minutes(spec: str) -> float:
    """Slurm's --time in minutes: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", spec.strip())
    if not m:
        raise ValueError(
            f"--time={spec!r} is not a Slurm time; write minutes, H:MM:SS or D-HH:MM:SS"
        )
    days, a, b, c = m.groups()
    if days is not None:  # D-H, D-H:M, D-H:M:S
        hours, mins, secs = int(a), int(b or 0), int(c or 0)
        return int(days) * 1440 + hours * 60 + mins + secs / 60
    if c is not None:  # H:M:S
        return int(a) * 60 + int(b) + int(c) / 60
    if b is not None:  # M:S
        return int(a) + int(b) / 60
    return float(a)


def memory_mb(spec: str) -> float:
    """Slurm's --mem in MB: 4000, 500M, 4G, 1T (a number alone means MB)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)B?", spec.strip().upper())
    if not m:
        raise ValueError(f"--mem={spec!r} is not a size; write e.g. 4000 (MB), 500M or 8G")
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2}[m[2]]
    return float(m[1]) * scale


def gpus_in(gres: str) -> int:
    """GPUs asked for in a --gres value: "gpu:2", "gpu:a100:4", "gpu" (one)."""
    for item in gres.split(","):
        parts = item.split(":")
        if parts[0] == "gpu":
            last = parts[-1] if len(parts) > 1 else "1"
            return int(last) if last.isdigit() else 1
    return 0


@dataclass(frozen=True)
class Request:
    """What a header asks for, per the options that decide it (None: not said)."""

    nodes: int
    tasks: int | None  # --ntasks, else nodes x --ntasks-per-node
    tasks_per_node: int | None
    cpus_per_task: int
    gpus_per_node: int
    mem_mb: float | None  # per node (--mem); --mem-per-cpu is multiplied out
    minutes: float | None
    signal: str | None  # e.g. "B:USR1@120", as written (`parse_signal` reads it)
    options: dict


def read_request(script: str) -> Request:
    """The request of a batch script's header."""
    o = parse_header(script)
    nodes = int(o.get("--nodes", "1").split("-")[0])
    per_node = int(o["--ntasks-per-node"]) if "--ntasks-per-node" in o else None
    tasks = int(o["--ntasks"]) if "--ntasks" in o else (per_node * nodes if per_node else None)
    cpus = int(o.get("--cpus-per-task", "1"))
    if "--gpus-per-node" in o:
        gpus = gpus_in("gpu:" + o["--gpus-per-node"])
    elif "--gpus-per-task" in o:  # per task: times the tasks of a node
        gpus = gpus_in("gpu:" + o["--gpus-per-task"]) * (per_node or -(-(tasks or 1) // nodes))
    elif "--gres" in o:
        gpus = gpus_in(o["--gres"])
    elif "--gpus" in o:
        gpus = -(-gpus_in("gpu:" + o["--gpus"]) // nodes)
    else:
        gpus = 0
    mem = memory_mb(o["--mem"]) if o.get("--mem") else None
    if mem is None and o.get("--mem-per-cpu"):
        mem = memory_mb(o["--mem-per-cpu"]) * cpus * (per_node or tasks or 1)
    time = minutes(o["--time"]) if o.get("--time") else None
    return Request(nodes, tasks, per_node, cpus, gpus, mem, time, o.get("--signal"), o)


# The names sbatch knows (Slurm's src/common/proc_args.c, signals_mapping), "SIG" optional.
SIGNAL_NAMES = (
    "HUP INT QUIT ABRT KILL ALRM TERM CHLD USR1 USR2 PIPE URG CONT STOP TSTP TTIN TTOU XCPU"
).split()


@dataclass(frozen=True)
class Signal:
    """What `--signal=[{R|B}:]<sig_num>[@sig_time]` asks: the signal, how many seconds before
    the time limit, and whom: the batch shell alone (B:), else every job step but not the batch
    shell; R: lets the job overlap a reservation."""

    number: int
    seconds: int
    batch_shell: bool
    reservation: bool = False

    @property
    def name(self) -> str:
        try:
            return signal.Signals(self.number).name
        except ValueError:
            return str(self.number)

    @property
    def whom(self) -> str:
        return "the batch shell" if self.batch_shell else "every job step (not the batch shell)"


def parse_signal(spec: str) -> Signal:
    """--signal's value read as sbatch reads it (get_signal_opts): the flags R and B before an
    optional ':', a signal number or name ("10", "USR1", "SIGUSR1", any case), then '@' and the
    seconds (60 when left out). B:10@300, B:SIGUSR1@300 and B:USR1@300 are one request."""
    rest, flags = spec.strip(), set()
    for flag in ("R", "B", "R"):
        if rest[:1].upper() == flag:
            flags.add(flag)
            rest = rest[1:]
    rest = rest.removeprefix(":")
    name, at, seconds = rest.partition("@")
    word = name.strip().upper().removeprefix("SIG")
    if name.strip().isdigit():
        number = int(name)
    elif word in SIGNAL_NAMES:
        number = int(signal.Signals[f"SIG{word}"])
    else:
        number = 0
    after = int(seconds) if seconds.isdigit() else 0 if at and not seconds else 60  # "@": 0
    if not 0 < number <= 0xFFFF or (seconds and not seconds.isdigit()) or after > 0xFFFF:
        raise ValueError(
            f"--signal={spec!r} is not what sbatch reads: [{{R|B}}:]<signal>[@<seconds>], a "
            f"signal number or one of {', '.join(SIGNAL_NAMES)} (SIG optional), seconds "
            "0-65535; write e.g. --signal=B:USR1@120"
        )
    return Signal(number, after, "B" in flags, "R" in flags)
