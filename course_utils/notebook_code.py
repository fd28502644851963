"""A function defined in a notebook cell, made to run as a module of its own: the import lines
its source needs from the notebook's globals. Lesson 05's check writes the learner's train_ddp
out for its ranks this way, and lesson 10's staging step the learner's stage_dataset.

Torch-free: the programs that import the written module import nothing heavy through it.
"""

from __future__ import annotations

import types


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
