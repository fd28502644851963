"""A function defined in a notebook cell, made to run as a module of its own: its source, the
import lines it needs from the notebook's globals, and the digest that ties a run's results to
the code that produced them. Taught in lessons 05 and 10: lesson 05's job runs the learner's
train_ddp on its ranks this way, and lesson 10's staging step the learner's stage_dataset.

    path = notebook_code.function_module(stage_dataset, "stage_dataset", folder)
    notebook_code.digest(notebook_code.source(stage_dataset))   # what results carry

Torch-free: the programs that import the written module import nothing heavy through it.
"""

from __future__ import annotations

import hashlib
import inspect
import textwrap
import types
from pathlib import Path

from course_utils.files import atomic_write_text


def imports_for(fn) -> list[str]:
    """Import lines for the modules, classes and functions `fn` uses from its notebook's
    globals (an `import tarfile` in any cell, `Path` from pathlib), so that its source runs as a
    module of its own. Names the notebook itself defines (variables, its own functions) are
    not carried: the module would not have them."""
    lines = []
    for name in fn.__code__.co_names:
        value = fn.__globals__.get(name)
        if isinstance(value, types.ModuleType):
            lines.append(f"import {value.__name__} as {name}")
        elif getattr(value, "__module__", None) not in (None, "__main__", "builtins"):
            qualname = getattr(value, "__qualname__", name)
            if "." not in qualname:
                lines.append(f"from {value.__module__} import {qualname} as {name}")
    return lines


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
