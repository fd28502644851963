"""A judge beside one graded run: started with the notebook, ended after it, and read.

    with judge_beside(seed, limits, lessons=["01"]) as judge:
        run = runner.run_notebook(..., sockets=judge.doors(), announce=judge.runner_end)
    judge.verdicts   # Verdicts: each exercise's verdict, the knocks the judge refused

The judge (process.py) is a process of the grader's own: outside the sandbox, it imports torch
and the lessons' checkers once per notebook, and it listens on a Unix socket in a folder of its
own, which the runner shows inside the run as its one door out. The grader also makes a socket
pair: the judge gets one end, the run's pytest the other (`runner_end`), on which it announces
each check cell (runner/announce.py). Its verdicts file stays in the folder, out of the run's
reach.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import processes, witness
from course_utils.grading.exercises import JUDGE_VARIABLE
from course_utils.grading.judge import SHOWN, kernel
from course_utils.grading.runner.limits import Limits
from course_utils.paths import PACKAGE_DIR

READY = "judge: ready"  # the judge's first line on stdout, once its socket listens
PROGRAM = f"{__package__}.process"
# Seconds for the judge to import torch and the checkers on a busy node: a check cell knocks on
# its socket for as long (kernel.WAIT), so the run need not wait for it to listen.
START_TIMEOUT = kernel.WAIT
# The socket lives alone in DOOR, the folder the sandbox shows the run; the verdicts file and the
# judge's log stay beside it, outside the run's reach.
DOOR, SOCKET, VERDICTS, LOG = "door", "judge.sock", "verdicts.jsonl", "judge.log"
HIDDEN = (("grading/checks", ()), ("grading/grader", ()), ("grading/judge", SHOWN))


class JudgeDidNotStart(RuntimeError):
    """The judge process ended or stayed silent before it listened; the message has its words."""


@dataclass
class Verdicts:
    """What a judge wrote: the verdict of each exercise's check, and the knocks it refused."""

    lines: dict[str, dict] = field(default_factory=dict)
    refused: list[dict] = field(default_factory=list)


def read_verdicts(path: Path) -> Verdicts:
    """The judge's verdict per exercise (one per check cell) and its refusals (a line that is
    neither is passed over)."""
    found = Verdicts()
    if not path.exists():
        return found
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if isinstance(line, dict) and "refused" in line:
            found.refused.append(line)
        elif isinstance(line, dict) and "exercise" in line:
            found.lines.setdefault(str(line["exercise"]), line)
    return found


@dataclass
class Judge:
    socket: Path
    runner_end: socket.socket | None  # the run's pytest announces each check cell on it
    verdicts: Verdicts = field(default_factory=Verdicts)

    @staticmethod
    def hidden() -> tuple[tuple[str, tuple[str, ...]], ...]:
        """What of course_utils a run beside this judge must not see (`Layout.masked`): the
        checkers and their references, the judge's own side and the grader. The run keeps the
        kernel's end of a check (SHOWN) and the probes, which run beside the learner's code;
        nothing it can import holds an expected answer."""
        return hidden_in_runs()

    def doors(self) -> dict[str, Path]:
        """The variables a run gets, each naming the judge's socket: its checks knock there,
        and the course's programs it starts report there."""
        return {JUDGE_VARIABLE: self.socket, witness.VARIABLE: self.socket}


def judge_command(
    folder: Path, seed: int | None, cell_timeout: float, fd: int, lessons: Iterable[str] = ()
) -> list[str]:
    cmd = [sys.executable, "-m", PROGRAM, str(folder / DOOR / SOCKET)]
    cmd += [str(folder / VERDICTS), "--timeout", f"{cell_timeout:g}", "--runner-fd", str(fd)]
    cmd += [word for lesson in lessons for word in ("--lesson", lesson)]
    return cmd + ([] if seed is None else ["--seed", str(seed)])


def hidden_in_runs() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Folders of course_utils hidden in a graded run, each with the files of it still shown."""
    return tuple((str(PACKAGE_DIR / folder), shown) for folder, shown in HIDDEN)


@contextlib.contextmanager
def judge_beside(seed: int | None, limits: Limits, lessons: Iterable[str] = ()):
    """A judge listening for one notebook's checks (of `lessons`; none named: every lesson's);
    its verdicts are read when the block ends."""
    folder = Path(tempfile.mkdtemp(prefix="course-judge-"))  # short: a socket path has a limit
    (folder / DOOR).mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": str(limits.threads), "PYTHONUNBUFFERED": "1"}
    judge_end, runner_end = socket.socketpair()
    command = judge_command(folder, seed, limits.cell_timeout, judge_end.fileno(), lessons)
    try:
        with (
            open(folder / LOG, "wb") as log,
            processes.started(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                pass_fds=(judge_end.fileno(),),
            ) as proc,
        ):
            judge_end.close()  # the judge holds its end now
            # The run starts while the judge imports torch (both take seconds, on two cores at
            # once); a judge that never listened is said after the run, from its own words.
            judge = Judge(folder / DOOR / SOCKET, runner_end)
            yield judge
            _wait_until_listening(proc, folder)
        judge.verdicts = read_verdicts(folder / VERDICTS)
    finally:
        judge_end.close()
        runner_end.close()
        shutil.rmtree(folder, ignore_errors=True)


def _wait_until_listening(proc: subprocess.Popen, folder: Path) -> None:
    """Until the judge said it listens (after importing torch and the checkers), or gave up."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        if READY in (folder / LOG).read_text(errors="replace"):
            return
        time.sleep(0.05)
    said = (folder / LOG).read_text(errors="replace").strip()[-2000:]
    how = "ended" if proc.poll() is not None else f"said nothing in {START_TIMEOUT:g} s"
    raise JudgeDidNotStart(f"the judge {how} before it listened: {said or 'no output'}")
