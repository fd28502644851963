"""The course's own tooling: exercises and their checkers, grading, release and authoring.

Lessons use only `check` and `summary` (`from course_utils.grading import check, summary`);
checkers register with `exercise`. The rest serves the `course` command:
    exercises.py     the registry, `check`, `summary`, verdict lines
    checks/          one module of checkers per lesson (lesson05.py <-> exercises 05.k)
    release.py       `course release`: notebooks/ from solutions/
    runner/          one notebook run under nbval within limits, knowing nothing of grades: the
                     bubblewrap sandbox, cgroups, `Limits`, the run, its per-cell record, the
                     kernel watch (runner/__init__.py lists its modules)
    grader/          submissions to a gradebook: finding them, the grading plan, verdicts, the
                     pipeline, the gradebook, `course grade` and `course check` (it imports the
                     runner, never the reverse)
    authoring.py     edit a lesson as a percent script, build it back (executed)
    gpu_report.py    `make test-gpu`: every step on a GPU node, one summary table
    sanitize.cfg     nbval's rules for outputs that differ between runs and machines
    sandbox.py, nbval_runner.py, gradebook.py, learner.py, kernel_watch.py: old paths of moved
                     modules, kept working (_moved.py)
Library code never imports this package, except lessons' `check`/`summary`.
"""

from course_utils.grading.exercises import (
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    CheckFailed,
    Exercise,
    Result,
    call_answer,
    check,
    exercise,
    expect,
    lesson_exercises,
    parse_results,
    parse_verdicts,
    registry,
    run_check,
    summary,
)

__all__ = [
    "FAILED",
    "NOT_ATTEMPTED",
    "PASSED",
    "CheckFailed",
    "Exercise",
    "Result",
    "call_answer",
    "check",
    "exercise",
    "expect",
    "lesson_exercises",
    "parse_results",
    "parse_verdicts",
    "registry",
    "run_check",
    "summary",
]
