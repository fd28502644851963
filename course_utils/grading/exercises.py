"""Graded exercises: the registry of checkers and `check`, the call every check cell makes.

A checker is a function registered under an exercise id such as "01.2". It receives what the
learner's check cell passes and raises `CheckFailed` (or AssertionError) when the answer is wrong.
`check` turns every outcome into one printed line and never raises, so a learner's notebook runs
top to bottom on a fresh kernel whatever state the exercises are in.

The lines have a fixed shape that `course check` and `course grade` parse:
    [01.2] passed: <what was verified>
    [01.2] failed: <what was expected and what came>
    [01.2] not attempted yet: <how to start>

Held-out cases: a checker may register more cases with `held_out`, drawn at grade time from a
seed. Only the instructor's grade runs them (`course grade --seed`, which sets HELD_OUT_SEED in
each run), after a passing check; they print nothing, so the check cell's line stays the
solution's, and their count goes on the run's side channel (grading/runner/channel.py) for the
grader. `course check` (no seed) says how many there are, not what they are.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import pkgutil
import random
import re
import sys
import warnings
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
_HELD_OUT: dict[str, HeldOut] = {}
HELD_OUT_SEED = "COURSE_HELD_OUT_SEED"  # set in each run of `course grade`; nowhere else
HELD_OUT_KIND = "held-out"  # the `kind` of its lines on the run's side channel


@dataclass(frozen=True)
class HeldOut:
    exercise_id: str
    cases: int
    checker: Callable[..., None]  # checker(rng, *answer): one case drawn from rng, checked


@dataclass(frozen=True)
class HeldOutResult:
    exercise_id: str
    cases: int
    passed: int
    failures: tuple[str, ...] = ()  # the first few messages, for the instructor

    def line(self) -> dict:
        """What goes on the run's side channel."""
        return {
            "kind": HELD_OUT_KIND,
            "exercise": self.exercise_id,
            "cases": self.cases,
            "passed": self.passed,
            "failures": list(self.failures),
        }


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


def held_out(exercise_id: str, cases: int):
    """Register held-out cases of `exercise_id`: `checker(rng, *args, **kwargs)` draws one case
    from `rng` (a random.Random of its own) and checks the answer the check cell passed on it,
    raising CheckFailed when it is wrong. The instructor's grade runs it `cases` times."""
    if cases < 1:
        raise ValueError(f"held_out({exercise_id!r}, cases={cases}): give at least 1 case")

    def register(checker):
        known = _HELD_OUT.get(exercise_id)
        if known is not None and known.checker is not checker:
            raise ValueError(f"held-out cases of {exercise_id!r} are registered twice")
        _HELD_OUT[exercise_id] = HeldOut(exercise_id, cases, checker)
        return checker

    return register


def held_out_cases(exercise_id: str) -> int:
    """How many held-out cases the instructor's grade runs for `exercise_id` (0: none)."""
    _load_checkers()
    found = _HELD_OUT.get(exercise_id)
    return found.cases if found else 0


def case_rng(seed: int, exercise_id: str, case: int) -> random.Random:
    """The generator of one held-out case: the same seed gives the same case on any machine."""
    return random.Random(f"{seed}/{exercise_id}/{case}")


def run_held_out(exercise_id: str, seed: int, *args, **kwargs) -> HeldOutResult | None:
    """Run the held-out cases of `exercise_id` on the answer in `args`; None when it has none.

    What the answer prints or warns meanwhile is swallowed, and the global random generators
    are restored after, so the notebook's outputs stay those of a run without the cases.
    """
    _load_checkers()
    found = _HELD_OUT.get(exercise_id)
    if found is None:
        return None
    passed, failures = 0, []
    with _quiet(), _global_rngs_kept():
        for case in range(found.cases):
            try:
                found.checker(case_rng(seed, exercise_id, case), *args, **kwargs)
                passed += 1
            except (CheckFailed, AssertionError) as e:
                failures.append(str(e) or "the answer did not pass the case")
            except (Exception, SystemExit) as e:  # the learner's code may raise anything
                failures.append(f"your code raised {type(e).__name__}: {e}")
    return HeldOutResult(exercise_id, found.cases, passed, tuple(f[:300] for f in failures[:3]))


@contextlib.contextmanager
def _quiet():
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _global_rngs_kept():
    """Python's, NumPy's and PyTorch's global generators as they were, whatever the cases drew
    (later cells of the notebook draw from them)."""
    state = random.getstate()
    numpy = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy is not None else None
    torch = sys.modules.get("torch")
    forked = torch.random.fork_rng(devices=[]) if torch is not None else contextlib.nullcontext()
    try:
        with forked:
            yield
    finally:
        random.setstate(state)
        if numpy_state is not None:
            numpy.random.set_state(numpy_state)


def _held_out_for_the_grade(result: Result, args, kwargs) -> None:
    """In a run of `course grade` (HELD_OUT_SEED set), a passing check also runs its held-out
    cases and reports them on the run's side channel; nothing happens anywhere else."""
    seed = os.environ.get(HELD_OUT_SEED)
    if not (seed and result.passed):
        return
    from course_utils.grading.runner import channel

    outcome = run_held_out(result.exercise_id, int(seed), *args, **kwargs)
    if outcome is not None:
        channel.append(outcome.line())


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
    _held_out_for_the_grade(result, args, kwargs)


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
