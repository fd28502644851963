"""Grading: exercises and their checkers, and the grader that turns submissions into grades.

Lessons use only `check` and `summary` (`from course_utils.grading import check, summary`);
checkers register with `exercise`, and their held-out cases (run only by `course grade`) with
`held_out`. The rest serves the `course` command:
    exercises.py     the registry, `check`, `summary`, verdict lines
    catalog.py       what each exercise declares, read from the checkers without importing them
    notebooks.py     the cell-metadata contract, and the release of a solution notebook
    judge/           the judge: the process that decides the verdicts of one graded notebook,
                     its doors, and the kernel's end of a check (judge/__init__.py)
    probes/          what a check runs in the learner's process, one module per lesson
    checks/          one module of checkers per lesson (lesson05.py <-> exercises 05.k), with
                     their references; never shown inside a graded run
    runner/          one notebook run under nbval within limits, knowing nothing of grades: the
                     bubblewrap sandbox, cgroups, `Limits`, the run, its per-cell record, the
                     kernel watch (runner/__init__.py lists its modules)
    grader/          submissions to a gradebook: finding them, the grading plan, verdicts, the
                     pipeline, the gradebook, `course grade` and `course check` (it imports the
                     runner, never the reverse)
    sanitize.cfg     nbval's rules for outputs that differ between runs and machines
Authoring the lessons, writing notebooks/ (`course release`), `make test-gpu` and the site are
course tooling (course_utils/tooling/), which imports grading, never the reverse. Library code
never imports this package, except lessons' `check`/`summary`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Imported on first use (PEP 562): the runner's plugins load this package inside every graded
# run, whose process needs none of it; judge/proxies.py imports torch (about 2 s on 2 cores).
_HOMES = ("exercises", "judge.proxies")

if TYPE_CHECKING:
    from course_utils.grading.exercises import (
        FAILED,
        NOT_ATTEMPTED,
        PASSED,
        Exercise,
        Result,
        call_answer,
        check,
        exercise,
        expect,
        held_out,
        held_out_cases,
        lesson_exercises,
        parse_results,
        parse_verdicts,
        registry,
        run_check,
        summary,
    )
    from course_utils.grading.judge.proxies import (
        CheckFailed,
        NotAttempted,
        outside,
        probe,
        run_probe,
    )


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for home in _HOMES:
        module = importlib.import_module(f"{__name__}.{home}")
        if hasattr(module, name):
            globals()[name] = value = getattr(module, name)
            return value
    raise AttributeError(f"{__name__}.{name} is in __all__ but in none of {_HOMES}")


__all__ = [
    "FAILED",
    "NOT_ATTEMPTED",
    "NotAttempted",
    "PASSED",
    "CheckFailed",
    "Exercise",
    "Result",
    "call_answer",
    "check",
    "exercise",
    "expect",
    "held_out",
    "held_out_cases",
    "lesson_exercises",
    "outside",
    "parse_results",
    "parse_verdicts",
    "probe",
    "registry",
    "run_probe",
    "run_check",
    "summary",
]
