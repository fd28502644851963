"""Old module paths of the grading tooling, from before it was split into two rooms (runner/,
grader/): instructors' scripts and checks written against `course_utils.grading.sandbox`,
`.nbval_runner`, `.gradebook`, `.learner` and `.kernel_watch` keep working. Each old module
holds no code of its own: `forward` finds every name in the modules that now define it (the
same objects, so there is nothing to keep in step). The course's own code uses the new paths.
"""

from __future__ import annotations

import importlib


def forward(old: str, *modules: str):
    """A module `__getattr__` (PEP 562) for the old module `old`: a name is looked up in
    `modules`, in order, imported on first use."""

    def __getattr__(name: str):
        for module in modules:
            found = importlib.import_module(module)
            if hasattr(found, name):
                return getattr(found, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r} (it moved to {modules})")

    return __getattr__
