"""`course grade SUBMISSIONS --out OUT --slurm [--tasks N] [--sbatch OPTION...]`, start to end.

Key each submission (results.py), submit the ones without a result as a job array (array.py,
shards.py), wait for it, say how each task ended, and merge every submission's result into the
gradebook a local run writes (prepared.finish). Running it again grades only what still has no
result: what a failed or cancelled task left, and what changed since.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from course_utils import processes
from course_utils.files import atomic_write_text
from course_utils.grading.grader import array
from course_utils.grading.grader.gradebook import ERROR
from course_utils.grading.grader.prepared import Prepared, finish
from course_utils.grading.grader.results import (
    Store,
    choose_seed,
    file_digest,
    grading_context,
    result_key,
    to_do,
)
from course_utils.grading.grader.shards import lesson_costs, shard, task_count
from course_utils.paths import PACKAGE_DIR, course_file, repo_dir

# `course grade` options a task needs to grade as the command would (limits_from_args reads them)
TASK_OPTIONS = (
    "timeout",
    "cell_timeout",
    "jobs",
    "no_sandbox",
    "max_procs",
    "max_memory",
    "max_file_size",
    "max_disk",
    "cpu_time",
    "account",
    "since",
    "until",
    "logins",
)


def task_options(args) -> dict:
    return {name: getattr(args, name, None) for name in TASK_OPTIONS}


def lesson_files(lessons) -> dict[str, list[Path]]:
    """Lesson -> the course's files its grade depends on: its solution notebook and checkers."""
    files = {}
    for lesson in lessons:
        found = sorted(repo_dir("solutions").glob(f"{lesson}_*.ipynb"))[:1]
        checks = PACKAGE_DIR / "grading" / "checks" / f"lesson{lesson}.py"
        files[lesson] = found + ([checks] if checks.exists() else [])
    return files


def result_keys(ready: Prepared, seed: int, options: dict) -> dict:
    """Submission -> the key of its result (content, learner, lesson, grading context)."""
    limits_given = {k: v for k, v in options.items() if k != "jobs"}
    context = grading_context(seed, limits_given, lesson_files(ready.lessons))
    return {s: result_key(s, file_digest(s.path), context[s.lesson]) for s in ready.subs}


def expected_seconds(store: Store):
    """A submission's expected grading time: the mean of its lesson's results in the store
    (any learner, any earlier run), else the mean over lessons, else 1."""
    costs = lesson_costs(store.seconds_by_lesson())
    default = sum(costs.values()) / len(costs) if costs else 1.0
    return lambda sub: costs.get(sub.lesson, default)


def grade_on_cluster(args, ready: Prepared) -> int:
    out, store = Path(args.out), Store(Path(args.out))
    seed = choose_seed(args.seed, store.seed())
    if store.seed() not in (None, seed):
        print(
            f"held-out seed {seed}, not {store.seed()} as before: every submission is graded "
            "again (the earlier results stay in results/)",
            file=sys.stderr,
        )
    options = task_options(args)
    keys = result_keys(ready, seed, options)
    graded = store.graded(keys.values())
    todo, kept = to_do(keys, graded)
    store.keep_seed(seed)
    start, shares, outcomes, job = time.perf_counter(), [], [], None
    if todo:
        for sub in todo:  # a result where the grader failed is replaced, not counted as done
            store.path(keys[sub]).unlink(missing_ok=True)
        tasks = task_count(len(todo), args.tasks)
        shares = shard(todo, tasks, expected_seconds(store))
        run_dir = array.new_run_dir(out)
        plan = array.manifest(out, seed, options, ready.hidden, shares, keys)
        atomic_write_text(run_dir / "manifest.json", json.dumps(plan, indent=1) + "\n")
        command = array.sbatch_command(course_file(array.SCRIPT), run_dir, tasks, args.sbatch)
        try:
            job = array.submit(command)
        except RuntimeError as e:
            print(f"course grade: {e}", file=sys.stderr)
            return 2
        print(
            f"job array {job}: {tasks} tasks grade {len(todo)} submissions ({kept} kept from "
            f"earlier runs); task output in {run_dir}/; Ctrl-C cancels the job, and what it "
            "graded is kept"
        )
        try:
            records = _wait(job, store, [keys[s] for s in todo])
        except KeyboardInterrupt:
            processes.run(["scancel", job], timeout=60)
            print(
                f"cancelled job {job}; run the same command again to grade the rest",
                file=sys.stderr,
            )
            return 130
        outcomes = array.outcomes(run_dir, tasks, records)
    else:
        print(f"every submission already has its result ({kept}): nothing to grade")
    return _merge(args, ready, store, keys, (todo, kept, shares, outcomes, job), start, seed)


def _wait(job: str, store: Store, keys: list[str]) -> dict[int, dict]:
    """Wait for the array with a progress bar of the results kept; Slurm's record per task."""
    from tqdm import tqdm

    counted = array.progress_counter(store, keys)
    with tqdm(total=len(keys), desc=f"job {job}", unit="notebook") as bar:

        def show() -> None:
            bar.update(counted() - bar.n)

        return array.wait(job, on_poll=show)


def _merge(args, ready: Prepared, store: Store, keys, run, start: float, seed: int) -> int:
    """The gradebook of every submission that has a result; what has none, said with why."""
    todo, kept, shares, outcomes, job = run
    grades = [g for g in (store.load(keys[s]) for s in ready.subs) if g is not None]
    missing = len(ready.subs) - len(grades)
    finish(args, grades)
    for outcome, share in zip(outcomes, shares, strict=False):
        if not outcome.ok:
            print(array.describe_missing(outcome, share, store, keys), file=sys.stderr)
    if job:
        print(
            f"graded {len(todo) - missing} submissions in {time.perf_counter() - start:.1f} s "
            f"with {len(shares)} tasks of job {job}, {kept} kept from earlier runs; held-out "
            f"seed {seed}"
        )
    if missing:
        print(
            f"{missing} submissions have no result yet: run the same command again to grade "
            "only them",
            file=sys.stderr,
        )
    return 1 if missing or any(g.status == ERROR for g in grades) else 0
