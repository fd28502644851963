"""Reading what the ranks of a launch printed: the failing rank's own words.

torchrun's summary names the root-cause rank and its exit code, not its error. `failure_cause`
finds that rank's own lines: from the per-rank logs a launch keeps (`rank_outputs`, torchrun's
`--log-dir`), else from the "[rankN]:" prefix PyTorch puts on a rank's traceback once its group
exists, else the last traceback that is not torchrun's own. A rank that gave up with
`sys.exit("message")`, died of a C++ abort ("terminate called after ...") or a signal has no
traceback: its last lines of its own say why. Used by `launching.launch` and lesson 09's checks.
Taught in lessons 05 and 09.
"""

from __future__ import annotations

import re
from pathlib import Path

_RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?")
_ROOT_CAUSE = re.compile(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.DOTALL)
_LAUNCHER_FRAMES = ("torch/distributed/run.py", "torch/distributed/launcher", "ChildFailedError")
_TRACEBACK = ["Traceback (most recent call last):"]
# The first line of an exception's text: "pkg.SomeError: text", "Name: text" or a bare
# "KeyboardInterrupt"; never indented, never a source line such as "x = f(y)".
_EXCEPTION_HEADER = re.compile(r"^[A-Za-z_][\w.]*(: |:$|(Error|Exception|Interrupt|Exit)$)")


def _error_lines(lines: list[str]) -> list[list[str]]:
    """The exception text of each Python traceback in `lines` (what follows its frames)."""
    found, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("Traceback (most recent call last)"):
            i += 1
            continue
        i += 1
        while (
            i < len(lines)
            and not lines[i].startswith("Traceback")
            and not (_EXCEPTION_HEADER.match(lines[i]))
        ):
            # frames: '  File ...', their source lines and ^^^ markers, and the pieces of them
            # another rank's unbuffered write tore off onto a line of their own
            i += 1
        message = []
        while i < len(lines) and not lines[i].startswith("Traceback"):
            if re.match(r"^(\[?[EWI]\d{4} |\*{5}|\[rank\d+\]:)", lines[i]):
                break  # torchrun's own log lines and PyTorch's C++ warnings end the message
            if message and lines[i].startswith(" "):
                break  # another rank's frames, printed into the middle of this traceback
            message.append(lines[i].rstrip())
            i += 1
        found.append([m for m in message if m])
    return found


def root_cause(output: str) -> tuple[int, int] | None:
    """(rank, exit code) of the rank torchrun's summary calls the root cause: the first to exit
    with an error (in a hang, a rank that waited rather than the one that stalled)."""
    m = _ROOT_CAUSE.search(output)
    return (int(m[1]), int(m[2])) if m else None


def failure_cause(output: str, rank_output: dict[int, str] | None = None) -> str | None:
    """The failing rank's own error lines from a launch's output, e.g. "Duplicate GPU detected".

    rank_output: each rank's own text (`rank_outputs`); with it, the root-cause rank's traceback,
    or its last lines when it left none (sys.exit("..."), a C++ abort, a signal). Without it,
    PyTorch's "[rankN]:" prefix picks out that rank's traceback; before a group exists (or
    without torchrun) the last traceback that is not torchrun's own is used. None when nothing
    names a cause.
    """
    lines = output.splitlines()
    root = root_cause(output)
    rank_of_root = root[0] if root else None
    if rank_output and rank_output.get(rank_of_root, "").strip():
        return own_cause(f"rank {rank_of_root}", root[1], rank_output[rank_of_root])
    by_rank: dict[int, list[str]] = {}
    plain = []
    for line in lines:
        m = _RANK_PREFIX.match(line)
        if m:
            by_rank.setdefault(int(m[1]), []).append(line[m.end() :])
        else:
            plain.append(line)
    if rank_of_root is not None and by_rank.get(rank_of_root):
        messages = _error_lines(by_rank[rank_of_root])
        who = f"rank {rank_of_root}"
    else:
        tracebacks = "\n".join(plain).split("Traceback (most recent call last)")[1:]
        mine = [t for t in tracebacks if not any(m in t for m in _LAUNCHER_FRAMES)]
        messages = [msg for t in mine for msg in _error_lines(_TRACEBACK + t.splitlines()[1:])]
        who = f"rank {rank_of_root}" if rank_of_root is not None else "the program"
    messages = [m for m in messages if m]
    if not messages:
        if root and root[1] < 0:
            return f"cause: {who} was killed by signal {-root[1]} (no Python traceback)"
        return None
    shown = messages[-1][:8]
    return f"cause ({who}): " + "\n  ".join(shown)


# torchrun's --tee prefix, "[default1]:" (its role name, then the local rank)
_TEE_PREFIX = re.compile(r"^\[default(\d+)\]:")
OWN_LINES = 4  # last lines of a rank's own output shown when it left no traceback


def strip_tee_prefix(line: str) -> str:
    """`line` without torchrun's "[default<rank>]:" prefix (lines keep their newline)."""
    return _TEE_PREFIX.sub("", line, count=1)


def rank_outputs(log_dir: str | Path) -> dict[int, str]:
    """Each rank's own stdout then stderr, from torchrun's `--log-dir` folder
    (<run id>/attempt_<n>/<local rank>/{stdout,stderr}.log; the last attempt wins)."""
    found: dict[int, str] = {}
    attempts = sorted(Path(log_dir).glob("*/attempt_*"), key=lambda p: int(p.name.split("_")[1]))
    for attempt in attempts:
        for folder in attempt.iterdir():
            if folder.is_dir() and folder.name.isdigit():
                texts = [folder / f for f in ("stdout.log", "stderr.log")]
                found[int(folder.name)] = "".join(
                    t.read_text(errors="replace") for t in texts if t.exists()
                )
    return found


def _last_own_lines(text: str) -> list[str]:
    lines = [_RANK_PREFIX.sub("", line).rstrip() for line in text.splitlines()]
    return [line for line in lines if line.strip()][-OWN_LINES:]


def own_cause(who: str, code: int | None, text: str) -> str:
    """The cause in one process's own output (`who`: "rank 1", "the program"): its traceback's
    message, else its last lines, with how it ended (exit `code`; negative: a signal)."""
    lines = [_RANK_PREFIX.sub("", line) for line in text.splitlines()]
    messages = [m for m in _error_lines(lines) if m]
    if messages:
        return f"cause ({who}): " + "\n  ".join(messages[-1][:8])
    last = _last_own_lines(text)
    if code is not None and code < 0:
        how = f"{who} was killed by signal {-code}"
    else:
        how = f"{who} exited" + (f" with code {code}" if code is not None else "")
    if not last:
        return f"cause: {how} (no Python traceback, and it printed nothing)"
    return f"cause: {how} without a Python traceback; its last lines:\n  " + "\n  ".join(last)
