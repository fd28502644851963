"""The options the course's programs share, defined once: a typed, documented config.

Lessons 05 and 06 run the programs that read it (`--batch-size 32`, `--epochs 2`). As torchtitan's
job_config.py, the config is a dataclass whose fields carry their help, and the command line is
built from it: `Shared` holds every option two or more programs take, with its type, default,
help and rule. A program's config is a dataclass of its own that takes the shared options it
needs with `shared(name, default)` (its own default; the type and help stay Shared's) and adds
its own with `option(default, help)`; `parse(Config, argv)` builds the argparse parser from it
(`--batch-size` from batch_size) and returns a Config. `resumable.Config` is one such config.

    @dataclass(kw_only=True)
    class Options:
        batch_size: int = shared("batch_size", 32)
        arch: str = option("net", "which model", choices=["net", "widenet"])

    args = parse(Options, argv, __doc__)  # args.batch_size: int
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Sequence
from dataclasses import MISSING, dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def option(default: Any = MISSING, help: str = "", *, minimum=None, choices=None) -> Any:
    """A documented field: its default (none: the option is required), its help, and its rule
    (`minimum`, `choices`), which `parse` checks."""
    metadata = {"help": help, "minimum": minimum, "choices": choices}
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(kw_only=True)
class Shared:
    """Every option that two or more programs take. Each program picks its own default."""

    batch_size: int = option(
        64, "images per step and process; a job's global batch is this x its ranks", minimum=1
    )
    lr: float = option(0.05, "SGD learning rate, for the global batch (not rescaled with ranks)")
    epochs: int = option(1, "passes over the training images", minimum=1)
    steps: int = option(8, "SGD steps (one epoch at most)", minimum=1)
    max_steps: int | None = option(None, "batches per epoch at most (a short run)", minimum=1)
    seed: int = option(0, "seeds the initial weights and the order of the data")
    images: int = option(4096, "synthetic training images", minimum=1)
    threads: int | None = option(
        None, "torch threads per process (unset: the CPUs allocated to its task)", minimum=1
    )
    disable_cuda: bool = option(False, "run on the CPU even where a GPU is free")
    save: str | None = option(None, "save the final state_dict here (in a job, rank 0 saves it)")


_SHARED = {f.name: f for f in dataclasses.fields(Shared)}
_UNSET = object()


def shared(name: str, default: Any = _UNSET) -> Any:
    """The shared option `name` (a field of `Shared`) for a program's config, with the
    program's `default` (else Shared's)."""
    if name not in _SHARED:
        raise ValueError(f"{name!r} is no shared option; choose from {sorted(_SHARED)}")
    spec = _SHARED[name]
    default = spec.default if default is _UNSET else default
    return dataclasses.field(default=default, metadata={**spec.metadata, "shared": name})


def _base_type(hint) -> type:
    """int for `int` and `int | None`; the one type an option's text is converted to."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
    return hint


def _check_shared_types(config: type, hints: dict) -> None:
    shared_hints = typing.get_type_hints(Shared)
    for f in dataclasses.fields(config):
        name = f.metadata.get("shared")
        if name and hints[f.name] != shared_hints[name]:
            raise TypeError(
                f"{config.__name__}.{f.name} is typed {hints[f.name]}, but the shared option "
                f"{name!r} is {shared_hints[name]}: declare it as Shared does"
            )


def parser(config: type, description: str | None = None) -> argparse.ArgumentParser:
    """An argparse parser with one option per field of the dataclass `config`."""
    hints = typing.get_type_hints(config)
    _check_shared_types(config, hints)
    first_line = (description or config.__doc__ or "").strip().splitlines()[:1]
    p = argparse.ArgumentParser(description=first_line[0] if first_line else None)
    for f in dataclasses.fields(config):
        flag, kind = "--" + f.name.replace("_", "-"), _base_type(hints[f.name])
        help = f.metadata.get("help", "")
        if kind is bool:
            p.add_argument(flag, action="store_true", default=f.default, help=help)
            continue
        required = f.default is MISSING
        if not required and f.default is not None:
            help = f"{help} (default: {f.default})" if help else f"default: {f.default}"
        p.add_argument(
            flag,
            type=kind,
            required=required,
            default=None if required else f.default,
            choices=f.metadata.get("choices"),
            help=help,
        )
    return p


def parse(config: type[T], argv: Sequence[str] | None = None, description: str | None = None) -> T:
    """The command line `argv` (default sys.argv[1:]) read into a `config`; a value that breaks
    its option's rule ends the program with a usage error that names the option and the rule."""
    p = parser(config, description)
    args = vars(p.parse_args(argv))
    for f in dataclasses.fields(config):
        minimum, value = f.metadata.get("minimum"), args[f.name]
        if minimum is not None and value is not None and value < minimum:
            flag = "--" + f.name.replace("_", "-")
            p.error(f"{flag} {value}: must be at least {minimum}")
    return config(**args)
