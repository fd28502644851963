"""Plain-text tables for terminals and notebooks: one way to line up columns (first used in
lesson 02; the benchmarks, lesson 08's tuning and the gradebook print theirs with it)."""

from __future__ import annotations

from collections.abc import Sequence


def cell(value) -> str:
    """A value as table text: thousands separators for large numbers, 3 digits for small ones."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return str(value)


def text_table(
    header: Sequence[str], rows: Sequence[Sequence | str], right: Sequence[int] | str = "numbers"
) -> str:
    """`rows` under `header`, columns padded to their widest cell, joined by two spaces.

    A row that is a plain string is a note: printed as it is, under the row before it.
    right: indexes of right-aligned columns, or "numbers" for the columns whose values are all
    numbers (or None). Trailing spaces are stripped.
    """
    grid = [r for r in rows if not isinstance(r, str)]
    if right == "numbers":
        right = [
            i
            for i in range(len(header))
            if grid and all(isinstance(r[i], (int, float)) or r[i] is None for r in grid)
        ]
    texts = [[cell(v) for v in r] if not isinstance(r, str) else r for r in rows]
    widths = [
        max([len(h)] + [len(t[i]) for t in texts if not isinstance(t, str)])
        for i, h in enumerate(header)
    ]

    def line(values):
        return "  ".join(
            v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))
        ).rstrip()

    return "\n".join([line(header), *(t if isinstance(t, str) else line(t) for t in texts)])
