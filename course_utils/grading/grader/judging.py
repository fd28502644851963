"""The judge beside each graded run: started with the notebook, ended after it, and read.

    with judge_beside(seed, limits) as judge:
        run = runner.run_notebook(..., sockets={JUDGE_VARIABLE: judge.socket})
    judge.verdicts   # {exercise id: the judge's last verdict line}

The judge (grading/judge.py) is a process of the grader's own: outside the sandbox, it imports
the checkers and torch once per notebook, and it listens on a Unix socket in a folder of its own,
which the runner shows inside the run as the one door to it. Its verdicts file stays in that
folder, where the run cannot reach.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import processes
from course_utils.grading import exercises
from course_utils.grading import judge as judge_program
from course_utils.grading.runner.limits import Limits

# Seconds for the judge to import torch and the checkers on a busy node: a check cell knocks on
# its socket for as long (exercises.JUDGE_WAIT), so the run need not wait for it to listen.
START_TIMEOUT = exercises.JUDGE_WAIT
# The socket lives alone in DOOR, the folder the sandbox shows the run; the verdicts file and the
# judge's log stay beside it, outside the run's reach.
DOOR, SOCKET, VERDICTS, LOG = "door", "judge.sock", "verdicts.jsonl", "judge.log"


class JudgeDidNotStart(RuntimeError):
    """The judge process ended or stayed silent before it listened; the message has its words."""


@dataclass
class Judge:
    socket: Path
    verdicts: dict[str, dict] = field(default_factory=dict)  # filled when the block ends


def judge_command(folder: Path, seed: int | None, cell_timeout: float) -> list[str]:
    cmd = [sys.executable, "-m", judge_program.__name__, str(folder / DOOR / SOCKET)]
    cmd += [str(folder / VERDICTS), "--timeout", f"{cell_timeout:g}"]
    return cmd + ([] if seed is None else ["--seed", str(seed)])


@contextlib.contextmanager
def judge_beside(seed: int | None, limits: Limits):
    """A judge listening for one notebook's checks; its verdicts are read when the block ends."""
    folder = Path(tempfile.mkdtemp(prefix="course-judge-"))  # short: a socket path has a limit
    (folder / DOOR).mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": str(limits.threads), "PYTHONUNBUFFERED": "1"}
    try:
        with (
            open(folder / LOG, "wb") as log,
            processes.started(
                judge_command(folder, seed, limits.cell_timeout),
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            ) as proc,
        ):
            # The run starts while the judge imports torch (both take seconds, on two cores at
            # once); a judge that never listened is said after the run, from its own words.
            judge = Judge(folder / DOOR / SOCKET)
            yield judge
            _wait_until_listening(proc, folder)
        judge.verdicts = judge_program.read_verdicts(folder / VERDICTS)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _wait_until_listening(proc: subprocess.Popen, folder: Path) -> None:
    """Until the judge said it listens (after importing torch and the checkers), or gave up."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        if judge_program.READY in (folder / LOG).read_text(errors="replace"):
            return
        time.sleep(0.05)
    said = (folder / LOG).read_text(errors="replace").strip()[-2000:]
    how = "ended" if proc.poll() is not None else f"said nothing in {START_TIMEOUT:g} s"
    raise JudgeDidNotStart(f"the judge {how} before it listened: {said or 'no output'}")
