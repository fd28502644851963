"""Graded exercises: the registry of checkers and `check`, the call every check cell makes.

A checker is a function registered under an exercise id such as "01.2". It receives what the
learner's check cell passes and raises `CheckFailed` (or AssertionError) when the answer is wrong.
`check` turns every outcome into one printed line and never raises, so a learner's notebook runs
top to bottom on a fresh kernel whatever state the exercises are in.

The lines have a fixed shape that `course check` and `course grade` parse:
    [01.2] passed: <what was verified>
    [01.2] failed: <what was expected and what came>
    [01.2] not attempted yet: <how to start>
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted yet"
VERDICT_LINE = re.compile(r"^\[(?P<id>\d\d\.\d+)\] (?P<verdict>passed|failed|not attempted yet)")
EXERCISE_ID = re.compile(r"^\d\d\.\d+$")


class CheckFailed(Exception):
    """Raised by a checker for a wrong answer; the message says what was expected and what came."""


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    points: int
    checker: Callable[..., str | None]


@dataclass(frozen=True)
class Result:
    exercise_id: str
    verdict: str
    message: str

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    def line(self) -> str:
        return f"[{self.exercise_id}] {self.verdict}: {self.message}"


_REGISTRY: dict[str, Exercise] = {}
_SESSION: dict[str, Result] = {}  # latest result per exercise in this kernel, for `summary`


def exercise(exercise_id: str, title: str, points: int = 1):
    """Register a checker under `exercise_id` ("NN.k"). The checker returns a short success note."""
    if not EXERCISE_ID.match(exercise_id):
        raise ValueError(
            f"exercise id {exercise_id!r} must look like 'NN.k' (lesson, dot, number), e.g. '01.2'"
        )

    def register(checker):
        if exercise_id in _REGISTRY and _REGISTRY[exercise_id].checker is not checker:
            raise ValueError(f"exercise id {exercise_id!r} is registered twice; ids must be unique")
        _REGISTRY[exercise_id] = Exercise(exercise_id, title, points, checker)
        return checker

    return register


def _load_checkers() -> None:
    """Import every module of course_utils.grading.checks, whose import registers the checkers."""
    from course_utils.grading import checks

    for info in pkgutil.iter_modules(checks.__path__):
        importlib.import_module(f"{checks.__name__}.{info.name}")


def registry() -> dict[str, Exercise]:
    """All exercises, keyed by id, in id order."""
    _load_checkers()
    return dict(sorted(_REGISTRY.items(), key=lambda kv: tuple(map(int, kv[0].split(".")))))


def lesson_exercises(lesson: str) -> list[Exercise]:
    return [ex for ex_id, ex in registry().items() if ex_id.startswith(f"{lesson}.")]


def run_check(exercise_id: str, *args, **kwargs) -> Result:
    """Run one checker and classify the outcome; never raises for anything the learner did."""
    exercises = registry()
    if exercise_id not in exercises:
        known = ", ".join(exercises) or "none"
        return Result(exercise_id, FAILED, f"unknown exercise id; known ids: {known}")
    try:
        note = exercises[exercise_id].checker(*args, **kwargs)
    except NotImplementedError:
        return Result(
            exercise_id, NOT_ATTEMPTED, "replace `raise NotImplementedError` in the exercise cell"
        )
    except (CheckFailed, AssertionError) as e:
        return Result(exercise_id, FAILED, str(e) or "the answer did not pass the check")
    except SystemExit as e:  # sys.exit() in an answer would otherwise abort the check cell
        return Result(exercise_id, FAILED, f"your code called sys.exit({e.code!r}); return instead")
    except Exception as e:  # learner code may raise anything; report it instead of crashing
        return Result(exercise_id, FAILED, f"your code raised {type(e).__name__}: {e}")
    return Result(exercise_id, PASSED, note or "all checks passed")


def check(exercise_id: str, *args, **kwargs) -> None:
    """Check a learner's answer and print one line: passed, failed (with why) or not attempted."""
    result = run_check(exercise_id, *args, **kwargs)
    _SESSION[exercise_id] = result
    print(result.line())


def summary(lesson: str) -> None:
    """Print how many of the lesson's exercises passed their check in this session.

    Its output is stored in every solution notebook and compared by nbval: keep it stable. The
    grader's verdict for the saved notebook (fresh kernel, released check cells): `course check`.
    """
    exercises = lesson_exercises(lesson)
    passing = [ex.id for ex in exercises if _SESSION.get(ex.id) and _SESSION[ex.id].passed]
    print(f"lesson {lesson}: {len(passing)}/{len(exercises)} exercises passing")
    for ex in exercises:
        result = _SESSION.get(ex.id)
        verdict = result.verdict if result else "not checked in this session"
        print(f"  {ex.id} {ex.title}: {verdict}")


def expect(condition: bool, expected, got, what: str = "") -> None:
    """Raise CheckFailed showing what was expected and what came, unless `condition` holds."""
    if not condition:
        prefix = f"{what}: " if what else ""
        raise CheckFailed(f"{prefix}expected {expected}, got {got}")


def call_answer(answer: Callable, *args, **kwargs):
    """Call the learner's function; a stub's NotImplementedError propagates as 'not attempted'."""
    if not callable(answer):
        raise CheckFailed(f"expected a function, got {type(answer).__name__}")
    return answer(*args, **kwargs)


def parse_results(text: str) -> dict[str, Result]:
    """Result per exercise id from printed check lines (the last line for an id wins)."""
    results = {}
    for line in text.splitlines():
        m = VERDICT_LINE.match(line.strip())
        if m:
            message = line.strip()[m.end() :].removeprefix(":").strip()
            results[m["id"]] = Result(m["id"], m["verdict"], message)
    return results


def parse_verdicts(text: str) -> dict[str, str]:
    """Verdict per exercise id from printed check lines (the last line for an id wins)."""
    verdicts = {}
    for line in text.splitlines():
        m = VERDICT_LINE.match(line.strip())
        if m:
            verdicts[m["id"]] = m["verdict"]
    return verdicts
