"""Reading the environment: integers from variables, with errors that name the variable, and
variables set for the length of a block.

The one parser behind DistEnv (torchrun's and Slurm's variables) and hpc (SLURM_CPUS_PER_TASK).
Lesson 09 sets a rank's variables for one block with `patched_environ`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

REQUIRED = object()  # `default` for a variable the launcher must have set


def env_int(
    name: str,
    environ: Mapping[str, str] | None = None,
    default=REQUIRED,
    minimum: int | None = None,
) -> int | None:
    """The integer in variable `name` of `environ` (default: os.environ).

    Unset or empty: `default`, or ValueError when it is REQUIRED. Not an integer, or below
    `minimum`: ValueError naming the variable, its value and the fix.
    """
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw in (None, ""):
        if default is REQUIRED:
            raise ValueError(f"{name} is not set; the launcher should set it")
        return default
    try:
        value = int(raw)
    except ValueError as e:
        raise ValueError(f"{name}={raw!r} is not an integer; fix or unset it") from e
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}={value} must be at least {minimum}; fix or unset it")
    return value


def _put(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@contextlib.contextmanager
def patched_environ(**values: str | None) -> Iterator[None]:
    """Set (or, with None, remove) variables of os.environ inside the block; restore after."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            _put(name, value)
        yield
    finally:
        for name, value in saved.items():
            _put(name, value)
