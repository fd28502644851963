"""The learner's own code, taken to where lesson 10's ranks run it: a function defined in a
notebook cell, written out as a module of its own (the staging step's ranks import it), and
the digest that ties a run's results to the code that produced them. Taught in lesson 10.

    path = yours.function_module(stage_dataset, "stage_dataset", folder)
    yours.digest(yours.source(stage_dataset))      # what the staging results carry

Torch-free: the staging program imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import inspect
import textwrap
from pathlib import Path

from course_utils.files import atomic_write_text
from course_utils.notebook_code import imports_for

STUB = "raise NotImplementedError"


def digest(text: str) -> str:
    """A short digest of a text (a function's source, a batch script): records carry it."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def source(fn) -> str:
    """The source of a function defined in a notebook cell or a file. ValueError when Python
    cannot read it (a lambda typed at a prompt, a built-in)."""
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as e:
        raise ValueError(f"the source of {fn!r} cannot be read ({e}); define it in a cell") from e


def is_stub(fn) -> bool:
    """Whether `fn` is still the released stub (its body raises NotImplementedError)."""
    try:
        return STUB in source(fn)
    except ValueError:
        return False


def function_module(fn, name: str, folder: Path) -> Path:
    """`fn` as <folder>/<name>_yours.py, importable as a module that defines `name`."""
    text = source(fn)
    alias = [] if fn.__name__ == name else [f"{name} = {fn.__name__}"]
    path = Path(folder) / f"{name}_yours.py"
    return atomic_write_text(path, "\n".join([*imports_for(fn), "", text, *alias, ""]))
