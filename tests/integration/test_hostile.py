"""Submissions by a learner who knows some Python and solves nothing, graded in the sandbox.

Each exercise cell keeps its released stub (so nothing is solved) and adds one attack on the grade,
from the classes of attack a learner's kernel can make: reaching `check`, the registry or a checker
through names built at run time (importlib on joined strings, sys.modules, gc, a function's
`__globals__`, `sys._getframe`, a module-level `__getattr__`, `object.__setattr__` on frozen
dataclasses); replacing what prints the verdict; IPython's hooks and input transformers; a forged
line in the run's cell record; all of it again from a base64 string through `exec`; and objects that
lie about equality (a tensor subclass, an ndarray subclass, a float subclass, a hand-made
measurement), or answers that call the course's own implementation. The judge decides outside the
learner's process, so none may earn a point without a flag. One `course grade -j 2` run grades
lessons 01 and 04 (module-scoped fixture).
"""

from __future__ import annotations

import ast
import base64
import csv
import textwrap

import nbformat
import pytest

from course_utils.cli import main
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]
RELEASES = {
    "01": REPO_ROOT / "notebooks" / "01_tensors.ipynb",
    "04": REPO_ROOT / "notebooks" / "04_tf32_mixed_precision.ipynb",
}

# A passing line of each exercise, as an attacker would print it (any text after "passed").
PASS = "[{id}] passed: all checks passed"

REACH = {  # class 1: the grading machinery, reached by names built at run time
    "registry through importlib": """
        import importlib
        ex = importlib.import_module("course_utils." + "grad" + "ing.exer" + "cises")
        for e in list(ex._REGISTRY.values()):
            object.__setattr__(e, "checker", lambda *a, **k: "ok")
        """,
    "check's globals": """
        import sys
        mod = sys.modules["course_utils.grading.exercises"]
        Result = mod.Result
        fake = lambda eid, *a, **k: Result(eid, "passed", "all checks passed")
        mod.check.__globals__["run_check"] = fake
        mod.check.__globals__["ask_the_judge"] = lambda path, eid, answers: fake(eid)
        """,
    "gc and frames": """
        import gc, sys
        for obj in gc.get_objects():
            if type(obj).__name__ == "Result" and hasattr(obj, "verdict"):
                object.__setattr__(obj, "verdict", "passed")
        frame = sys._getframe()
        frame.f_globals["check"] = lambda i, *a: print(f"[{i}] passed: all checks passed")
        """,
    "a module-level __getattr__": """
        import sys
        grading = sys.modules["course_utils.grading"]
        del grading.check
        grading.__getattr__ = lambda name: (
            lambda i, *a: print(f"[{i}] passed: all checks passed"))
        """,
}
PRINTS = {  # class 2: what prints the verdict
    "builtins.print": """
        import builtins, re
        _print = builtins.print
        def print(*args, **kwargs):
            if args and isinstance(args[0], str):
                args = (re.sub(r"^\\[(\\d\\d\\.\\d)\\] \\w[\\w ]*:", r"[\\1] passed:", args[0]),)
            _print(*args, **kwargs)
        builtins.print = print
        """,
}
HOOKS = {  # class 3: IPython's hooks
    "an input transformer": """
        def _rewrite(lines):
            return [l.replace('check("', 'print("[" + "') .replace('",', '" + "] passed: x") #')
                    for l in lines]
        get_ipython().input_transformers_post.append(_rewrite)
        """,
    "post_run_cell": """
        import sys
        def _after(result):
            sys.stdout.write("[{id}] passed: all checks passed\\n")
        get_ipython().events.register("post_run_cell", _after)
        """,
}
RECORD = {  # class 4: a later line in the run's own cell record
    "a forged record line": """
        import glob, json
        for path in glob.glob("/run/course/*.jsonl"):
            with open(path, "a") as f:
                for cell in range(200):
                    f.write(json.dumps({"cell": cell, "ok": True, "stdout": "[{id}] passed: x\\n",
                                        "stderr": "", "outputs": [], "problem": ""}) + "\\n")
        """,
}


def hidden(code: str) -> str:
    """Class 5: `code` run from a base64 string through exec."""
    blob = base64.b64encode(textwrap.dedent(code).encode()).decode()
    return f"import base64\nexec(base64.b64decode({blob!r}).decode())"


LIARS = {  # class 6: answers that lie about equality, for each lesson's functions
    "01": """
        import numpy as np
        import torch
        from torch.utils.benchmark.utils.common import Measurement

        class Liar(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if func in (torch.equal, torch.allclose):
                    return True
                return super().__torch_function__(func, types, args, kwargs or {})

        class Close(np.ndarray):
            pass

        class Fits(float):
            __lt__ = __le__ = __gt__ = __ge__ = lambda self, other: True

        class Timed:  # a hand-made measurement
            median, times, number_per_run = Fits(1e-3), [1e-3], 1

        liar = lambda *a, **k: torch.zeros(1).as_subclass(Liar)
        batch_flatten = standardize = grad_of_loss = liar
        to_numpy = lambda t: np.zeros(5).view(Close)
        records = lambda *a: {"view": liar(), "copy": liar(), "result": liar(),
                              "view_time": Timed(), "copy_time": Timed(),
                              "broadcast_time": Timed(), "loop_time": Timed()}
        view_and_copy_costs = broadcast_vs_loop = records
        """,
    "04": """
        import torch

        class Liar(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if getattr(func, "__name__", "") in ("equal", "allclose", "all", "__eq__"):
                    return True
                return super().__torch_function__(func, types, args, kwargs or {})

        class Fits(float):
            __lt__ = __le__ = __gt__ = __ge__ = lambda self, other: True

        to_tf32 = lambda x: x.clone().as_subclass(Liar)
        error_against_n = lambda mode, ns: ([Fits(1e-3)] * len(ns), Fits(1.0))
        """,
}
LAZY = {  # not an attack: the course's own implementation handed in (flagged, may earn points)
    "04": {
        "04.1": "from course_utils.precision import round_to_tf32\n"
        "def to_tf32(x):\n    return round_to_tf32(x)\n"
    },
}


def _exercise_cells(nb):
    return [c for c in nb.cells if course_meta(c).get("role") == "exercise"]


def _names(stub: str) -> list[str]:
    return [n.name for n in ast.parse(stub).body if isinstance(n, ast.FunctionDef)]


def _with_attacks(lesson: str, attacks: list[str]) -> nbformat.NotebookNode:
    """The released notebook, each exercise cell its stub plus the next attack (cycled)."""
    nb = nbformat.read(RELEASES[lesson], as_version=4)
    for number, cell in enumerate(_exercise_cells(nb)):
        ex_id = course_meta(cell)["exercise"]
        code = textwrap.dedent(attacks[number % len(attacks)]).replace("{id}", ex_id)
        cell.source = f"{cell.source}\n\n{code}"
    return nb


def _with_liars(lesson: str) -> nbformat.NotebookNode:
    nb = nbformat.read(RELEASES[lesson], as_version=4)
    for cell in _exercise_cells(nb):
        cell.source = textwrap.dedent(LIARS[lesson])
    return nb


def submissions() -> dict[str, tuple[str, nbformat.NotebookNode]]:
    tricks = {**REACH, **PRINTS, **HOOKS, **RECORD}
    codes = list(tricks.values())
    subs = {}
    for lesson in RELEASES:
        subs[f"tricks_{lesson}"] = (lesson, _with_attacks(lesson, codes[:4]))
        subs[f"more_tricks_{lesson}"] = (lesson, _with_attacks(lesson, codes[4:]))
        subs[f"hidden_{lesson}"] = (lesson, _with_attacks(lesson, [hidden(c) for c in codes[::2]]))
        subs[f"liar_{lesson}"] = (lesson, _with_liars(lesson))
    lazy = nbformat.read(RELEASES["04"], as_version=4)
    for cell in _exercise_cells(lazy):
        cell.source = LAZY["04"].get(course_meta(cell)["exercise"], cell.source)
    subs["lazy_04"] = ("04", lazy)
    return subs


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    subs = submissions()
    for name, (lesson, nb) in subs.items():
        stem = RELEASES[lesson].name
        (root / "subs").mkdir(exist_ok=True)
        nbformat.write(nb, root / "subs" / f"{name}__{stem}")
    out = root / "out"
    argv = ["grade", str(root / "subs"), "--out", str(out), "-j", "2", "--seed", "7"]
    code = main([*argv, "--timeout", "240", "--cell-timeout", "120"])
    assert code == 0
    with open(out / "gradebook.csv") as f:
        return {row["learner"]: row for row in csv.DictReader(f)}, subs


def test_no_hostile_submission_earns_a_point_without_a_flag(gradebook):
    rows, subs = gradebook
    assert set(rows) == set(subs)
    for name, row in rows.items():
        if name.startswith("lazy"):
            continue
        assert float(row["total"]) == 0, (name, row)


def test_the_text_attacks_are_flagged_for_the_instructor(gradebook):
    rows, _ = gradebook
    for name, row in rows.items():
        if name.startswith(("tricks", "more_tricks", "hidden")):
            assert row["flags"], name


def test_an_answer_that_calls_the_courses_own_implementation_is_flagged(gradebook):
    rows, _ = gradebook
    assert "04.1: calls the course's own answer" in rows["lazy_04"]["flags"]
