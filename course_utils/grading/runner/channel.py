"""A run's side channel: one file the notebook's own code may append JSON lines to.

The cell record (nbval_record.py) holds what nbval saw in each cell; some results belong on
neither a cell's printed output (nbval compares it) nor its record. A run therefore offers one
more file, whose path (as the run sees it) is in the variable `VARIABLE`; `append` writes a line
there from inside the run, and the runner reads the lines back as `Run.channel`. The runner
never looks at what the lines say: `course grade`'s held-out cases (grading/exercises.py) are
one user. Like the record, the file is the run's own: a submission can write to it too, which
only changes its own result (README, "Grading").
"""

from __future__ import annotations

import json
import os
from pathlib import Path

VARIABLE = "COURSE_RUN_CHANNEL"  # the channel's path inside the run; unset outside any run
FILE = "channel.jsonl"  # its name in the run's private folder
MAX_BYTES = 2**20  # what is read back (a flood of lines stops there)


def append(line: dict) -> bool:
    """Append `line` to this run's channel; False (nothing written) outside a run that has one."""
    path = os.environ.get(VARIABLE)
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    return True


def read(path: Path) -> list[dict]:
    """The lines of a channel file that are JSON objects, in order (at most MAX_BYTES read)."""
    if not path.exists():
        return []
    with open(path, "rb") as f:
        text = f.read(MAX_BYTES).decode("utf-8", errors="replace")
    lines = []
    for text_line in text.splitlines():
        try:
            value = json.loads(text_line)
        except ValueError:
            continue
        if isinstance(value, dict):
            lines.append(value)
    return lines
