"""A cell's outputs as a run records them, and nbval's comparison of them with a reference's.

The notebook that enters the sandbox carries no outputs, so nbval only runs it, and
nbval_record writes the outputs of its check cells (`recordable`), texts cut (`cut`, `clip`): a
submission that prints 100 MB must not make the record 100 MB. The grader then compares a check
cell's recorded outputs with the solution's outside the run, as nbval 0.11 compares them (plugin.py,
`IPyNbCell.compare_outputs`): the reference's streams coalesced, the same keys left out
(metadata, tracebacks, images, widget ids), the same regex/replace rules of the sanitize file on
both sides, the values of each key compared in order. The reference outputs never enter the
sandbox.
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from pathlib import Path

import nbformat

# nbval's skip_compare without --nbval-nbdime (images are not compared).
SKIPPED = frozenset(
    {
        "metadata",
        "traceback",
        "prompt_number",
        "output_type",
        "name",
        "execution_count",
        "application/vnd.jupyter.widget-view+json",
        "image/png",
        "image/jpeg",
    }
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # terminal colours in a traceback or a log
# Characters kept of each recorded value; a longer one never matches (a check prints one line:
# tests/grading/test_outputs.py keeps every lesson's reference under it).
VALUE_LIMIT = 4000


def cut(value):
    """`value` when short; else its start and a marker, which no reference output equals."""
    if isinstance(value, str) and len(value) > VALUE_LIMIT:
        return value[:VALUE_LIMIT] + f"\n[... {len(value) - VALUE_LIMIT} characters cut]"
    return value


def clip(text: str, limit: int = 4000) -> str:
    """The end of `text` (where a verdict line or an error is), marked when something was cut."""
    text = ANSI.sub("", text)
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} characters cut ...]\n" + text[-limit:]


def recordable(outputs) -> list[dict]:
    """A cell's outputs (nbval's, streams already coalesced) as nbval_record writes them:
    the compared values only, each cut to VALUE_LIMIT characters."""
    kept = []
    for out in outputs or []:
        kind = out.get("output_type")
        if kind == "stream":
            kept.append({"output_type": kind, "name": out.get("name"), "text": cut(out["text"])})
        elif kind in ("display_data", "execute_result"):
            data = {k: cut(v) for k, v in out.get("data", {}).items() if k not in SKIPPED}
            kept.append({"output_type": kind, "data": data})
        elif kind == "error":
            kept.append({"output_type": kind, "ename": out["ename"], "evalue": cut(out["evalue"])})
    return kept


def sanitize_rules(path: Path | None) -> dict[str, str]:
    """regex -> replacement from an nbval sanitize file; none without one."""
    if path is None or not Path(path).is_file():
        return {}
    from nbval.plugin import get_sanitize_patterns

    return dict(get_sanitize_patterns(Path(path).read_text()))


def _sanitize(value, rules: dict[str, str]):
    if not isinstance(value, str):
        return value
    for regex, replace in rules.items():
        value = re.sub(regex, replace, value)
    return value


def _by_key(outputs, rules: dict[str, str]) -> dict[str, list]:
    """nbval's comparison form: every compared key (MIME types flattened) -> its values."""
    from nbval.plugin import transform_streams_for_comparison

    values = defaultdict(list)
    for out in transform_streams_for_comparison([nbformat.from_dict(o) for o in outputs]):
        for key, value in out.items():
            if key in SKIPPED:
                continue
            if key == "data":
                for mime, data in value.items():
                    if mime not in SKIPPED:
                        values[mime].append(_sanitize(data, rules))
            else:
                values[key].append(_sanitize(value, rules))
    return values


def difference(recorded: list[dict], reference: list, rules: dict[str, str]) -> str:
    """ "" when nbval would find the recorded outputs equal to the reference's, else what
    differs, in a line or two for the feedback."""
    from nbval.plugin import coalesce_streams

    want = _by_key(coalesce_streams(copy.deepcopy(list(reference))), rules)
    got = _by_key(recorded, rules)
    missing, unexpected = set(want) - set(got), set(got) - set(want)
    if missing or unexpected:
        return (
            f"output fields differ: missing {sorted(missing) or 'none'}, "
            f"unexpected {sorted(unexpected) or 'none'}"
        )
    for key, values in want.items():
        if values != got[key]:
            return f"{key} differs: expected {_short(values)}, got {_short(got[key])}"
    return ""


def _short(values: list) -> str:
    text = repr(values[0] if len(values) == 1 else values)
    return text if len(text) <= 300 else text[:300] + "...'"
