"""Graded exercises: the registry of checkers and `check`, the call every check cell makes.

A checker is a function registered under an exercise id such as "01.2". It receives one proxy
(`answers.Answer`) per thing the learner's check cell passed, calls them on inputs it chooses and
gets plain data back (never an object of the learner's), and raises `CheckFailed` (or
AssertionError) when the answer is wrong. `check` turns every outcome into one printed line and
never raises, so a learner's notebook runs top to bottom on a fresh kernel whatever state the
exercises are in.

Where the checker runs: inside `course grade` and `course check`, in the judge (grading/judge/),
a process of its own that the learner's code cannot reach; `check` only answers the judge's
requests (judge/kernel.py) and prints the verdict the judge sent. Anywhere else (a notebook in
JupyterLab) it runs in this process on the same proxies (`judge.proxies.LocalSession`).

The lines have a fixed shape that `course check` and `course grade` parse:
    [01.2] passed: <what was verified>
    [01.2] failed: <what was expected and what came>
    [01.2] not attempted yet: <how to start>

Held-out cases: a checker may register more cases with `held_out`, drawn at grade time from a
seed that only the judge knows. Only the instructor's grade runs them (`course grade --seed`),
after a passing check; what the learner's code prints meanwhile is swallowed, so the check
cell's line stays the solution's. `course check` (no seed) says how many there are, not what.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from course_utils.grading.judge import proxies as answer_proxies
from course_utils.grading.judge.proxies import (
    AnswerExited,
    AnswerRaised,
    CheckFailed,
    NotAttempted,
)

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted yet"
VERDICT_LINE = re.compile(r"^\[(?P<id>\d\d\.\d+)\] (?P<verdict>passed|failed|not attempted yet)")
EXERCISE_ID = re.compile(r"^\d\d\.\d+$")


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    points: int
    checker: Callable[..., str | None]
    allows: tuple[str, ...] = ()  # review flags the exercise itself calls for (grader/plan.py)
    reference: tuple[str, ...] = ()  # patterns of the course's own answer to it (a lazy answer)


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
JUDGE_VARIABLE = "COURSE_JUDGE"  # the judge's socket, set in each run of `course grade`/`check`


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


def exercise(
    exercise_id: str,
    title: str,
    points: int = 1,
    allows: tuple[str, ...] = (),
    reference: tuple[str, ...] = (),
):
    """Register a checker under `exercise_id` ("NN.k"). The checker returns a short success note.

    `allows`: the review flags (grader/flags.py) that this exercise's own task
    raises, such as "starts processes" for a launch, so an honest answer is not flagged for
    them; `reference`: regular expressions that find a call of the course's own implementation
    of this exercise in an answer (flagged as such)."""
    if not EXERCISE_ID.match(exercise_id):
        raise ValueError(
            f"exercise id {exercise_id!r} must look like 'NN.k' (lesson, dot, number), e.g. '01.2'"
        )

    def register(checker):
        if exercise_id in _REGISTRY and _REGISTRY[exercise_id].checker is not checker:
            raise ValueError(f"exercise id {exercise_id!r} is registered twice; ids must be unique")
        _REGISTRY[exercise_id] = Exercise(
            exercise_id, title, points, checker, tuple(allows), tuple(reference)
        )
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
    load_checkers(exercise_id[:2])
    found = _HELD_OUT.get(exercise_id)
    return found.cases if found else 0


def case_rng(seed: int, exercise_id: str, case: int) -> random.Random:
    """The generator of one held-out case: the same seed gives the same case on any machine."""
    return random.Random(f"{seed}/{exercise_id}/{case}")


def run_held_out(exercise_id: str, seed: int, *answers, **params) -> HeldOutResult | None:
    """Run the held-out cases of `exercise_id` on `answers`; None when it has none.

    Each request marks itself quiet: what the learner's code prints or warns meanwhile is
    swallowed where it runs, and the global random generators are restored after, so the
    notebook's outputs stay those of a run without the cases.
    """
    load_checkers(exercise_id[:2])
    found = _HELD_OUT.get(exercise_id)
    if found is None:
        return None
    proxies = _proxies(answers, quiet=True)
    passed, failures = 0, []
    with answer_proxies.quiet():  # the checker's own output too (in the judge: its log)
        for case in range(found.cases):
            try:
                found.checker(case_rng(seed, exercise_id, case), *proxies, **params)
                passed += 1
            except (CheckFailed, AssertionError) as e:
                failures.append(str(e) or "the answer did not pass the case")
            except (ConnectionError, OSError):
                raise  # the kernel went away: not the answer's verdict
            except Exception as e:  # a checker's own bug is reported, not raised
                failures.append(_raised(e))
    return HeldOutResult(exercise_id, found.cases, passed, tuple(f[:300] for f in failures[:3]))


LOAD_ERRORS: dict[str, str] = {}  # checker module -> why it did not import


def checks_module(name: str):
    """The module course_utils.grading.checks.<name>, imported (which registers its checkers);
    None where its import fails, the error kept in LOAD_ERRORS."""
    from course_utils.grading import checks

    try:
        return importlib.import_module(f"{checks.__name__}.{name}")
    except Exception as e:  # a broken checker module costs its own lesson, not every lesson
        LOAD_ERRORS[name] = f"{type(e).__name__}: {e}"
        return None


def load_checkers(lesson: str | None = None) -> None:
    """Import the checker modules of `lesson` ("01": lesson01.py and lesson01_*.py; None: every
    module of course_utils.grading.checks), whose import registers the checkers. One that fails
    is kept in LOAD_ERRORS: the other lessons' checks still run."""
    from course_utils.grading import checks

    for info in pkgutil.iter_modules(checks.__path__):
        if lesson is None or info.name.startswith(f"lesson{lesson}"):
            checks_module(info.name)


def registry() -> dict[str, Exercise]:
    """All exercises, keyed by id, in id order."""
    load_checkers()
    return dict(sorted(_REGISTRY.items(), key=lambda kv: tuple(map(int, kv[0].split(".")))))


def lesson_exercises(lesson: str) -> list[Exercise]:
    return [ex for ex_id, ex in registry().items() if ex_id.startswith(f"{lesson}.")]


def _proxies(answers, quiet: bool = False) -> list:
    """The checker's view of `answers`: the judge's proxies as they are, or this process's own
    objects behind a LocalSession (the same plain-data rules either way)."""
    if answers and all(isinstance(a, answer_proxies.Answer) for a in answers):
        for a in answers:
            a.session.quiet = quiet
        return list(answers)
    session = answer_proxies.LocalSession(answers)
    session.quiet = quiet
    return session.proxies()


def _raised(e: BaseException) -> str:
    if isinstance(e, AnswerRaised):
        return f"your code raised {e.kind}: {e}"
    if isinstance(e, AnswerExited):
        return f"your code called sys.exit({e}); return instead"
    return f"your code raised {type(e).__name__}: {e}"


def run_check(exercise_id: str, *answers, **params) -> Result:
    """Run one checker on `answers` and classify the outcome; never raises for anything the
    learner did. `params`: the checker's own keyword arguments (tests use them)."""
    load_checkers(exercise_id[:2])
    exercises = _REGISTRY
    if exercise_id not in exercises:
        broken = LOAD_ERRORS.get(f"lesson{exercise_id[:2]}")
        if broken:
            return Result(exercise_id, FAILED, f"not graded: its checker did not load ({broken})")
        known = ", ".join(registry()) or "none"
        return Result(exercise_id, FAILED, f"unknown exercise id; known ids: {known}")
    try:
        note = exercises[exercise_id].checker(*_proxies(answers), **params)
    except NotAttempted as e:
        return Result(exercise_id, NOT_ATTEMPTED, str(e))
    except NotImplementedError:
        return Result(
            exercise_id, NOT_ATTEMPTED, "replace `raise NotImplementedError` in the exercise cell"
        )
    except (CheckFailed, AssertionError) as e:
        return Result(exercise_id, FAILED, str(e) or "the answer did not pass the check")
    except (ConnectionError, OSError) as e:
        if isinstance(answers[0] if answers else None, answer_proxies.Answer):
            raise  # the judge lost the kernel: the judge says so
        return Result(exercise_id, FAILED, _raised(e))
    except (AnswerExited, SystemExit) as e:  # sys.exit() in an answer: the check cell goes on
        code = e if isinstance(e, AnswerExited) else repr(e.code)
        return Result(exercise_id, FAILED, f"your code called sys.exit({code}); return instead")
    except Exception as e:  # learner code may raise anything; report it instead of crashing
        return Result(exercise_id, FAILED, _raised(e))
    return Result(exercise_id, PASSED, note or "all checks passed")


def check(exercise_id: str, *answers) -> None:
    """Check a learner's answer and print one line: passed, failed (with why) or not attempted.

    In `course grade` and `course check` the judge decides (JUDGE_VARIABLE names its socket);
    anywhere else the checker runs here."""
    judge = os.environ.get(JUDGE_VARIABLE)
    if judge:
        from course_utils.grading.judge.kernel import ask

        result = Result(exercise_id, *ask(judge, exercise_id, answers))
    else:
        result = run_check(exercise_id, *answers)
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
