"""Which task of a job array grades which submission: shares of about equal time.

Notebooks of different lessons take different times (seconds for lesson 01, a minute for a
lesson that builds C++ or launches ranks), so shares are balanced by expected time, not count:
the longest first, each to the task with the least so far (the LPT rule, within 4/3 of the best
split). Expected times come from earlier results of the same lesson when there are some, else
every notebook counts the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import fmean
from typing import TypeVar

T = TypeVar("T")

PER_TASK = 32  # submissions per task when --tasks is not given


def shard(
    items: Sequence[T], tasks: int, cost: Callable[[T], float] = lambda _: 1.0
) -> list[list[T]]:
    """`items` in `tasks` shares of about equal total cost; each share keeps the items' order.

    Deterministic: equal costs keep their order, and ties go to the lowest task.
    """
    if tasks < 1:
        raise ValueError(f"{tasks} tasks: a job array needs at least 1 task")
    loads = [0.0] * tasks
    owner: dict[int, int] = {}
    by_cost = sorted(range(len(items)), key=lambda i: (-cost(items[i]), i))
    for i in by_cost:
        task = min(range(tasks), key=lambda t: (loads[t], t))
        owner[i] = task
        loads[task] += cost(items[i])
    return [[items[i] for i in range(len(items)) if owner[i] == t] for t in range(tasks)]


def task_count(submissions: int, asked: int | None, per_task: int = PER_TASK) -> int:
    """How many tasks to submit: as asked (never more than there are submissions), else one per
    `per_task` submissions."""
    if asked is not None and asked < 1:
        raise ValueError(f"--tasks {asked}: give at least 1 task")
    wanted = asked if asked is not None else math.ceil(submissions / per_task)
    return max(1, min(wanted, submissions))


def lesson_costs(earlier: dict[str, list[float]]) -> dict[str, float]:
    """Lesson -> expected seconds per notebook, from the seconds of its earlier results."""
    return {lesson: fmean(seconds) for lesson, seconds in earlier.items() if seconds}
