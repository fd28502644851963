"""How a checker reaches the learner's answers: through proxies, as plain data.

A checker never holds the learner's objects. It gets one `Answer` per thing the check cell
passed; calling it runs the learner's function where the learner's code lives, on arguments the
checker chose, and gives back what it returned as plain data (`wire.decode`: exact tensors,
numbers, strings, lists, dicts). Where a check needs the learner's code to run inside a harness
of the course's (a simulated device, a data set that counts its reads, a launch of ranks), the
harness is a *probe*: course code registered with `@probe` in a module of grading/probes/, run
in the learner's process on their answers and the checker's inputs, returning plain data.

Two sessions carry the calls:
    LocalSession   the answers are in this process (a notebook run outside `course grade`, the
                   solutions under nbval): calls go straight to them, and their results still
                   make the round trip through `wire`, so the same rules judge them.
    KernelSession  the judge's end of a connection to the learner's kernel (process.py); the
                   kernel's end answers it (kernel.py).
Either session also says what can be seen of the learner's process from outside it
(`session.outside()`, judge/outside.py): the files it sees, the processes it starts.
Torch-free until an answer is checked: the grader imports the exceptions without it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import random
import sys
import warnings
from collections.abc import Callable, Sequence

_PROBES: dict[str, Callable] = {}
PROBES_PACKAGE = "course_utils.grading.probes"  # lessonNN.py holds the probes of "NN.k"


class CheckFailed(Exception):
    """Raised by a checker for a wrong answer; the message says what was expected and what came."""


class NotAttempted(NotImplementedError):
    """The learner has not done this yet; the message says what to do first ("run ... first").
    A stub's plain NotImplementedError is not attempted too, with the message `check` gives."""


class AnswerRaised(Exception):
    """The learner's code raised `kind` (its type's name) with `message`, in its own process."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class AnswerExited(Exception):
    """The learner's code called sys.exit (or raised SystemExit) during a check."""


def probe(name: str):
    """Register a harness that runs in the learner's process: `fn(*answers, **params)` gets the
    learner's real objects and the checker's inputs, and returns plain data. `name` starts with
    its exercise's id ("01.1", "10.1/staging"): the kernel finds it in probes/lesson01.py."""

    def register(fn):
        if name in _PROBES and _PROBES[name] is not fn:
            raise ValueError(f"probe {name!r} is registered twice; probe names must be unique")
        _PROBES[name] = fn
        fn.probe_name = name
        return fn

    return register


def find_probe(name: str) -> Callable:
    """The probe registered as `name`, its lesson's probe module imported on first use."""
    if name not in _PROBES and name[:2].isdigit():
        with contextlib.suppress(ImportError):
            importlib.import_module(f"{PROBES_PACKAGE}.lesson{name[:2]}")
    if name not in _PROBES:
        raise CheckFailed(f"no probe {name!r} in this course_utils")
    return _PROBES[name]


class Answer:
    """What the check cell passed as its `index`-th argument, reached through `session`."""

    def __init__(self, session, index: int, kind: str, is_callable: bool):
        self.session, self.index, self.kind, self.is_callable = session, index, kind, is_callable

    def __call__(self, *args, **kwargs):
        if not self.is_callable:
            raise CheckFailed(f"expected a function, got {self.kind}")
        return self.session.request({"op": "call", "answer": self.index}, (args, kwargs))

    def value(self):
        """The object itself, as plain data (a path becomes its text)."""
        return self.session.request({"op": "value", "answer": self.index}, None)

    def __repr__(self) -> str:
        return f"<your {self.kind}>"


def run_probe(harness: Callable, *answers: Answer, **params):
    """Run the registered probe `harness` on `answers` (Answer proxies) in the learner's process,
    with the checker's `params` (inputs, never an expected answer); returns plain data."""
    session = answers[0].session if answers else LocalSession(())
    header = {"op": "probe", "name": harness.probe_name, "answers": [a.index for a in answers]}
    return session.request(header, params)


def outside(*answers: Answer):
    """What the checker sees of the learner's process from outside it (judge/outside.py)."""
    session = answers[0].session if answers else LocalSession(())
    return session.outside()


def describe(obj) -> tuple[str, bool]:
    return type(obj).__name__, callable(obj)


# ---- the answers in this process -------------------------------------------------------------


class LocalSession:
    """Answers held in this process: each request runs at once, its result through `wire`."""

    quiet = False  # a held-out case: the learner's output swallowed, the global RNGs kept

    def __init__(self, answers: Sequence):
        self.answers = list(answers)

    def proxies(self) -> list[Answer]:
        return [Answer(self, i, *describe(a)) for i, a in enumerate(self.answers)]

    def request(self, header: dict, payload):
        # the same path as a remote request: plain data in, the same rules for what comes back
        from course_utils.grading.judge import wire  # torch: only where answers are checked

        params = wire.decode(wire.encode(payload))
        return from_reply(*answer_request(self.answers, {**header, "quiet": self.quiet}, params))

    def outside(self):
        from course_utils.grading.judge.outside import Outside  # where the checkers are

        return Outside(os.getpid())


def from_reply(reply: dict, data: bytes):
    """What a reply means on the judge's side: the value, or the learner's exception again."""
    from course_utils.grading.judge import wire  # torch: only where answers are checked

    if reply.get("op") == "result":
        try:
            return wire.decode(data)
        except wire.NotPlain as e:
            raise CheckFailed(str(e)) from None
    kind, message = str(reply.get("kind", "")), str(reply.get("message", ""))
    if kind == "NotAttempted":
        raise NotAttempted(message)
    if kind == "NotImplementedError":
        raise NotImplementedError(message)
    if kind == "CheckFailed":
        raise CheckFailed(message)
    if kind == "SystemExit":
        raise AnswerExited(message)
    raise AnswerRaised(kind or "an exception", message)


# ---- one request, run where the answers live ---------------------------------------------------


def answer_request(answers: Sequence, header: dict, params) -> tuple[dict, bytes]:
    """Run one request in this process: (reply header, encoded result)."""
    from course_utils.grading.judge import wire  # torch: only where answers are checked

    try:
        with quiet() if header.get("quiet") else contextlib.nullcontext():
            value = _run(answers, header, params)
        return {"op": "result"}, wire.encode(value)
    except KeyboardInterrupt:
        raise
    except SystemExit as e:
        return {"op": "raised", "kind": "SystemExit", "message": repr(e.code)}, b""
    except BaseException as e:  # the learner's code may raise anything: the judge is told
        return {"op": "raised", "kind": type(e).__name__, "message": _text(e)}, b""


def _run(answers: Sequence, header: dict, params):
    op = header.get("op")
    if op == "probe":
        harness = find_probe(str(header.get("name")))
        chosen = [answers[int(i)] for i in header.get("answers", [])]
        return harness(*chosen, **(params or {}))
    target = answers[int(header.get("answer", -1))]
    if op == "value":
        return target
    if op == "call":
        args, kwargs = params
        return target(*args, **kwargs)
    raise CheckFailed(f"unknown request {op!r}")


def _text(e: BaseException) -> str:
    try:
        return str(e)[:2000]
    except Exception:  # a __str__ that raises
        return "(the exception's message could not be read)"


@contextlib.contextmanager
def quiet():
    """No output, no warnings, and the global random generators as they were (a held-out case
    runs in the learner's kernel between two of its cells)."""
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
        warnings.catch_warnings(),
        _global_rngs_kept(),
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
