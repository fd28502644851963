"""The course's own tooling: exercises and their checkers, grading, release and authoring.

Lessons use only `check` and `summary` (`from course_utils.grading import check, summary`);
checkers register with `exercise`. The rest serves the `course` command:
    exercises.py     the registry, `check`, `summary`, verdict lines
    checks/          one module of checkers per lesson (lesson05.py <-> exercises 05.k)
    release.py       `course release`: notebooks/ from solutions/
    grader.py        `course grade`: each submission under nbval, in its own sandbox
    sandbox.py       the bubblewrap sandbox: what a run sees, its limits, whether bwrap works
    outputs.py       check cells' outputs compared with the reference outside the sandbox
    gradebook.py     the gradebook CSV, feedback, JUnit report
    learner.py       `course check NN`: the grader's verdicts for a learner's own notebook
    nbval_runner.py  one nbval run within limits;  nbval_record.py  its per-cell record
    kernel_watch.py  a pytest plugin: a notebook whose kernel dies fails at once
    authoring.py     edit a lesson as a percent script, build it back (executed)
    gpu_report.py    `make test-gpu`: every step on a GPU node, one summary table
    sanitize.cfg     nbval's rules for outputs that differ between runs and machines
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
