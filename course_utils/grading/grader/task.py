"""One task of `course grade --slurm`'s job array, on its node (slurm/grade_array.sh starts it):

    python -m course_utils.grading.grader.task OUT/slurm/run-*/manifest.json [--index I]

It grades the share of the manifest's task I (default: SLURM_ARRAY_TASK_ID) exactly as a local
`course grade` does: the limits from the same options, computed for this task's CPUs; the
sandbox checked on this node first, so a node without bubblewrap or user namespaces fails its
task with the reason and grades nothing unsandboxed; each result kept in OUT/results/ as soon
as it is done (results.py). Its status file (task-I.json beside the manifest) says how it ended
for the command that merges: running, done, refused (with the reason) or interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

from course_utils.files import atomic_write_text
from course_utils.grading.grader.array import STATUS
from course_utils.grading.grader.command import (
    check_sandbox,
    limits_from_args,
    sigterm_as_interrupt,
)
from course_utils.grading.grader.pipeline import grade_all
from course_utils.grading.grader.plan import Lesson
from course_utils.grading.grader.results import Store
from course_utils.grading.grader.slurm_rules import SlurmRules
from course_utils.grading.grader.submissions import Submission


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def jobs_here(asked: int | None) -> int:
    """Submissions graded at once in this task: as asked (-j), else half its CPUs."""
    from course_utils.hpc import allocated_cpus

    return asked if asked else max(1, allocated_cpus() // 2)


def run_task(manifest_path: Path, index: int) -> int:
    """Grade task `index`'s share of the manifest; 0 when every submission has its result."""
    data = json.loads(manifest_path.read_text())
    status = manifest_path.parent / STATUS.format(index)
    node, start = node_name(), time.perf_counter()

    def say(state: str, **more) -> None:
        atomic_write_text(status, json.dumps({"state": state, "node": node, **more}) + "\n")

    say("running")
    share = data["tasks"][index]
    options = argparse.Namespace(**data["options"])
    options.jobs = jobs_here(options.jobs)
    try:
        limits = limits_from_args(options)
        check_sandbox(limits, [Path(p) for p in data["hidden"]])
        lessons = _lessons({s["lesson"] for s in share})
    except ValueError as e:
        say("refused", reason=str(e))
        print(f"task {index} on {node} graded nothing: {e}", file=sys.stderr)
        return 3
    subs = [Submission(s["learner"], s["lesson"], Path(s["path"])) for s in share]
    entry = dict(zip(subs, share, strict=True))
    store = Store(Path(data["out"]))

    def keep(sub: Submission, grade) -> None:
        grade.source = entry[sub]["source"]  # as a local run records it: the path as found
        store.save(entry[sub]["key"], grade)

    print(
        f"task {index} on {node}: {len(subs)} submissions, -j {options.jobs}; {limits.describe()}"
    )
    try:
        with sigterm_as_interrupt():
            grades = grade_all(
                subs,
                lessons,
                limits,
                options.jobs,
                _sanitize(),
                Path(data["out"]) / "logs",
                progress=False,
                seed=data["seed"],
                on_grade=keep,
                rules=SlurmRules.from_args(options),
            )
    except KeyboardInterrupt as e:
        say("interrupted", reason=f"stopped by {e or 'an interrupt'} (scancel, or the time limit)")
        return 143
    for g in grades:
        print(f"  {g.learner} {g.lesson}: {g.total}/{g.max_total} {g.status} ({g.seconds:.1f} s)")
    say("done", graded=len(grades), seconds=round(time.perf_counter() - start, 1))
    return 0


def _lessons(numbers: set[str]) -> dict[str, Lesson]:
    from course_utils.paths import repo_dir

    return {n: Lesson.load(n, repo_dir("solutions")) for n in sorted(numbers)}


def _sanitize() -> Path:
    from course_utils.paths import SANITIZE_FILE

    return SANITIZE_FILE


def main(argv: list[str] | None = None) -> int:
    from course_utils.environment import env_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("manifest", help="the run's manifest.json")
    parser.add_argument("--index", type=int, help="the task (default: SLURM_ARRAY_TASK_ID)")
    args = parser.parse_args(argv)
    index = args.index if args.index is not None else env_int("SLURM_ARRAY_TASK_ID")
    return run_task(Path(args.manifest), index)


if __name__ == "__main__":
    sys.exit(main())
