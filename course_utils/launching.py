"""Launching a distributed program on this node from Python: torchrun in a child process whose
lines a notebook cell shows as they come, and whose failure names the failing rank's own words.

`launch` runs `python -m MODULE` under `torchrun --standalone` (or alone), through
`processes.run` (a session of its own, a time limit, the whole tree ended), in the environment of
a local launch (`ranks.local_launch_environ`: a kernel inside a Slurm job does not pass the job's
variables on). torchrun writes each rank's stdout and stderr to a log folder of its own and tees
them to the console with a `[default<rank>]:` prefix; the lines are shown and returned without
the prefix, and each rank's own text is kept for the error (`rank_logs.failure_cause`).
Re-exported by `course_utils.distributed`. Taught in lesson 05.
"""

from __future__ import annotations

import signal
import sys
import tempfile
from dataclasses import dataclass, field

from course_utils import processes
from course_utils.rank_logs import failure_cause, own_cause, rank_outputs, strip_tee_prefix
from course_utils.ranks import local_launch_environ


@dataclass(frozen=True)
class LaunchResult:
    returncode: int
    output: str  # every line the launch printed, in order, without torchrun's rank prefixes
    rank_output: dict[int, str] = field(default_factory=dict)  # rank -> its own stdout + stderr


def torchrun_command(module: str, args=(), nproc: int = 2, log_dir: str | None = None) -> list[str]:
    """The command line torchrun gets: one node, `nproc` processes, a free port (--standalone);
    with `log_dir`, each rank's output is written there too and tee'd to the console, prefixed."""
    if nproc < 1:
        raise ValueError(f"nproc={nproc} must be at least 1")
    logs = ["--log-dir", log_dir, "--redirects", "3", "--tee", "3"] if log_dir else []
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={nproc}", *logs, "-m", module, *map(str, args),
    ]  # fmt: skip


def launch(
    module: str,
    *args,
    nproc: int = 2,
    env: dict | None = None,
    timeout: float = 300,
    check: bool = True,
    echo: bool = True,
    torchrun: bool = True,
) -> LaunchResult:
    """Run `python -m module args` under torchrun (or alone with torchrun=False) and stream its
    output line by line, so a notebook cell shows it live; returns the exit code and the text.

    env: variables added to the local launch's environment (e.g. {"OMP_NUM_THREADS": "1"}); they
    win over what the local launch set aside, so a lesson can set up a broken environment on
    purpose. check: raise RuntimeError (with the failing rank's own last lines) when it fails.
    """
    local = local_launch_environ()
    child_env = {**local.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    if echo and local.note:
        print(local.note, flush=True)

    def show(line: str) -> None:
        if echo:
            print(strip_tee_prefix(line), end="", flush=True)

    with tempfile.TemporaryDirectory(prefix="course-launch-") as logs:
        cmd = (
            torchrun_command(module, args, nproc, log_dir=logs)
            if torchrun
            else [sys.executable, "-m", module, *map(str, args)]
        )
        done = processes.run(cmd, timeout=timeout, env=child_env, merge=True, on_line=show)
        own = rank_outputs(logs) if torchrun else {}
    lines = [strip_tee_prefix(line) for line in done.stdout.splitlines(keepends=True)]
    if done.timed_out:
        lines.append(f"launch: killed after the timeout of {timeout:g} s\n")
    # killed at the limit: SIGKILL is what ended it
    code = -signal.SIGKILL if done.timed_out else done.returncode
    result = LaunchResult(code, "".join(lines), own)
    if check and result.returncode != 0:
        cause = failure_cause(result.output, own) if torchrun else None
        if cause is None and not torchrun:  # one process: all of the output is its own
            cause = own_cause("the program", code, result.output)
        tail = "".join(lines[-15:])
        how = f" ({processes.exit_description(code)})" if code < 0 else ""
        raise RuntimeError(
            f"{' '.join(cmd)} exited with code {code}{how}"
            + (f"\n{cause}" if cause else "")
            + f"\n--- last lines of its output ---\n{tail}"
        )
    return result
