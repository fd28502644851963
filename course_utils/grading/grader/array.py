"""`course grade --slurm`: the submissions spread over a Slurm job array, then one gradebook.

The command, on a login node: key every submission by its content (results.py), keep those that
have no result yet, split them into shares of about equal time (shards.py), write a manifest
(OUT/slurm/run-*/manifest.json), and submit slurm/grade_array.sh with `sbatch --array=0-(N-1)`.
Each task (task.py, on its node) checks the sandbox there, grades its share as a local run does
and keeps each result in OUT/results/ as it is done. The command polls `squeue` until no task is
left, asks `scontrol` and each task's status file and output how it ended (`task_outcome`), and
merges the results of every submission into one gradebook, as a local run writes it. OUT and
the submissions must be on a file system the nodes share (a cluster's home or project space).
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from course_utils import processes
from course_utils.grading.grader.results import Store
from course_utils.grading.grader.submissions import Submission

SCRIPT = "slurm/grade_array.sh"  # the batch script each task runs (paths.course_file finds it)
POLL = 2.0  # seconds between two looks at squeue
# sbatch options the command sets itself: an instructor's own would break the array's wiring.
OWN_OPTIONS = {
    "-a": "--array",
    "--array": "--array",
    "-o": "--output",
    "--output": "--output",
    "-e": "--error",
    "--error": "--error",
    "-W": "--wait",
    "--wait": "--wait",
    "--parsable": "--parsable",
    "--wrap": "--wrap",
}
STATUS, OUTPUT = "task-{}.json", "task-{}.out"  # per task, in the run's folder


@dataclass(frozen=True)
class TaskOutcome:
    index: int
    state: str  # done, refused, cancelled, timeout, oom, failed
    node: str
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.state == "done"


def check_sbatch_options(options: list[str]) -> None:
    """ValueError when an sbatch option given after --sbatch is one the command sets itself, or
    what follows --sbatch does not start with an option."""
    if options and not options[0].startswith("-"):
        raise ValueError(
            f"--sbatch {options[0]!r}: not an sbatch option; everything after --sbatch goes to "
            "sbatch, so give it last, e.g. course grade subs --slurm --sbatch --partition=cpu"
        )
    for option in options:
        name = option.split("=", 1)[0]
        if name in OWN_OPTIONS:
            raise ValueError(
                f"sbatch option {option!r}: `course grade --slurm` sets {OWN_OPTIONS[name]} "
                "itself (the array, its output files, the waiting); give the number of tasks "
                "with --tasks N and leave it out"
            )


def sbatch_command(script: Path, run_dir: Path, tasks: int, options: list[str]) -> list[str]:
    """The sbatch command line of the array: ours first, the instructor's `options` after (they
    override the script's #SBATCH lines, and ours where sbatch lets them)."""
    return [
        "sbatch",
        "--parsable",
        f"--array=0-{tasks - 1}",
        "--job-name=course-grade",
        f"--output={run_dir / OUTPUT.format('%a')}",
        *options,
        str(script),
        str(run_dir / "manifest.json"),
    ]


def new_run_dir(out: Path) -> Path:
    """OUT/slurm/run-<time>/: the manifest, and each task's status and output."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    folder = out / "slurm" / f"run-{stamp}"
    folder.mkdir(parents=True)
    return folder


def manifest(out: Path, seed: int, options: dict, hidden: list[Path], shares, keys) -> dict:
    """What every task reads: where results go, the seed, `course grade`'s options, the paths
    the sandbox must hide, and each task's share (learner, lesson, the notebook's absolute path,
    its path as found, which a grade records, and its result key)."""
    return {
        "out": str(out.resolve()),
        "seed": seed,
        "options": options,
        "hidden": [str(Path(p).resolve()) for p in hidden],
        "tasks": [
            [
                {
                    "learner": s.learner,
                    "lesson": s.lesson,
                    "path": str(s.path.resolve()),
                    "source": str(s.path),
                    "key": keys[s],
                }
                for s in share
            ]
            for share in shares
        ],
    }


def submit(command: list[str]) -> str:
    """Submit the array; its job id. RuntimeError with sbatch's own words when it refuses."""
    if not shutil.which(command[0]):
        raise RuntimeError(
            "sbatch is not on PATH: run `course grade --slurm` where Slurm's commands are (a "
            "login node), or grade here without --slurm"
        )
    done = processes.run(command, timeout=120)
    job = done.stdout.strip().split(";")[0]
    if not done.ok or not job.isdigit():
        said = (done.stderr or done.stdout).strip() or done.describe()
        raise RuntimeError(f"sbatch refused the job array: {said}")
    return job


def parse_squeue(text: str) -> dict[int, str]:
    """Task index -> state, from `squeue -h -r -o %K|%T` lines."""
    states = {}
    for line in text.splitlines():
        index, _, state = line.strip().partition("|")
        if index.isdigit():
            states[int(index)] = state
    return states


def parse_scontrol(text: str) -> dict[int, dict[str, str]]:
    """Task index -> its fields (JobState, NodeList, ExitCode, ...), from `scontrol -o show
    job` lines of an array."""
    tasks = {}
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("ArrayTaskId", "").isdigit():
            tasks[int(fields["ArrayTaskId"])] = fields
    return tasks


def running_tasks(job: str) -> dict[int, str] | None:
    """The array's tasks still pending or running; None when squeue could not answer."""
    done = processes.run(["squeue", "-h", "-r", "-j", job, "-o", "%K|%T"], timeout=60)
    if done.ok:
        return parse_squeue(done.stdout)
    if "Invalid job id" in done.stderr:  # the job left the controller: nothing is running
        return {}
    return None


def slurm_records(job: str) -> dict[int, dict[str, str]]:
    """What `scontrol` still knows of each task of `job` (it forgets an ended job after
    MinJobAge: 300 s by default, 5 s on the CI cluster)."""
    shown = processes.run(["scontrol", "-o", "show", "job", job], timeout=60)
    return parse_scontrol(shown.stdout) if shown.ok else {}


def wait(
    job: str, poll: float = POLL, on_poll: Callable[[], None] = lambda: None
) -> dict[int, dict[str, str]]:
    """Poll squeue until no task of `job` is pending or running; `on_poll` between looks.

    Returns Slurm's record of each task, read as soon as it left squeue, while scontrol still
    has it (a task cancelled before it started leaves nothing else). RuntimeError when squeue
    fails for two minutes on end.
    """
    failures, listed, records = 0, set(), {}
    while True:
        tasks = running_tasks(job)
        on_poll()
        if tasks is not None:
            failures = 0
            if (listed - set(tasks)) - set(records) or not tasks:
                records.update(slurm_records(job))
            listed |= set(tasks)
            if not tasks:
                return records
        else:
            failures += 1
        if failures * poll > 120:
            raise RuntimeError(
                f"squeue has not answered about job {job} for two minutes; the tasks may still "
                "run: run the same command again later to merge what they graded"
            )
        time.sleep(poll)


def task_outcome(index: int, status: dict | None, fields: dict | None, output: str) -> TaskOutcome:
    """How task `index` ended, from its status file (written by the task), Slurm's record of it
    (`scontrol`, while Slurm keeps one) and the end of its output file."""
    status, fields = status or {}, fields or {}
    said = re.search(r"\*\*\* JOB \d+ ON (\S+) ", output)  # slurmstepd's line names the node
    node = status.get("node") or fields.get("NodeList", "") or (said[1] if said else "")
    state = fields.get("JobState", "")
    if status.get("state") in ("done", "refused"):
        return TaskOutcome(index, status["state"], node, status.get("reason", ""))
    if state == "TIMEOUT" or "DUE TO TIME LIMIT" in output:
        why = "it ran past its time limit; give more with --sbatch --time=HH:MM:SS, or more --tasks"
        return TaskOutcome(index, "timeout", node, why)
    if state == "CANCELLED" or re.search(r"\bCANCELLED AT\b", output):
        return TaskOutcome(index, "cancelled", node, "it was cancelled (scancel)")
    if state == "OUT_OF_MEMORY" or "oom-kill" in output or "Out Of Memory" in output:
        why = "it ran out of memory; give more with --sbatch --mem=SIZE, or a smaller -j"
        return TaskOutcome(index, "oom", node, why)
    last = [line for line in output.strip().splitlines() if line.strip()][-1:]
    why = status.get("reason") or (last[0][-300:] if last else "it left no output")
    return TaskOutcome(index, "failed", node, f"{state or 'it failed'}: {why}")


def outcomes(run_dir: Path, tasks: int, records: dict[int, dict]) -> list[TaskOutcome]:
    """How each task of the array ended, from what it left in `run_dir` and Slurm's `records`
    (`wait`'s)."""
    return [
        task_outcome(
            index,
            read_status(run_dir, index),
            records.get(index),
            _tail(run_dir / OUTPUT.format(index)),
        )
        for index in range(tasks)
    ]


def read_status(run_dir: Path, index: int) -> dict | None:
    try:
        return json.loads((run_dir / STATUS.format(index)).read_text())
    except (OSError, ValueError):
        return None


def _tail(path: Path, size: int = 4000) -> str:
    try:
        return path.read_bytes()[-size:].decode("utf-8", errors="replace")
    except OSError:
        return ""


def progress_counter(store: Store, keys: list[str]) -> Callable[[], int]:
    """How many of `keys` have a result file now (counted on each call)."""
    return lambda: sum(store.path(key).exists() for key in keys)


def describe_missing(outcome: TaskOutcome, share: list[Submission], store: Store, keys) -> str:
    """One line for a task that did not finish: where, why, and what it left ungraded."""
    left = [s for s in share if store.load(keys[s]) is None]
    names = ", ".join(f"{s.learner} {s.lesson}" for s in left[:6])
    names += f", and {len(left) - 6} more" if len(left) > 6 else ""
    where = f" on {outcome.node}" if outcome.node else ""
    text = f"task {outcome.index}{where}: {outcome.state}: {outcome.reason}"
    return text + (f"; {len(left)} submissions without a result: {names}" if left else "")
