"""What `course grade` holds a learner's jobs to, from its options: --account, --since, --until
and --logins (README, "Grading on the scheduler's record").

    rules = SlurmRules.from_args(args)         # ValueError names the option, the rule, the fix
    rules.judge_options("alice")               # the judge's options for alice's notebook

The judge (checks/slurm_record.py) reads each job a learner names from Slurm's accounting and
holds it to these: submitted by the learner's login (the submission's learner name, or the one
--logins maps it to), on the account, between --since and --until. With --account the course is
taken to have run on this cluster: a run exercise must name its job, not run locally.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

# sacct's own times: 2026-11-29T08:01:02 (a date alone is its midnight)
WHEN = re.compile(r"^\d{4}-\d\d-\d\d(T\d\d:\d\d(:\d\d)?)?$")


@dataclass(frozen=True)
class SlurmRules:
    account: str | None = None
    since: str | None = None
    until: str | None = None
    logins: dict[str, str] = field(default_factory=dict)  # learner -> cluster login

    @classmethod
    def from_args(cls, args) -> SlurmRules:
        since, until = (_when(getattr(args, n, None), f"--{n}") for n in ("since", "until"))
        if since and until and until < since:
            raise ValueError(f"--until {until} is before --since {since}: give a window forward")
        logins = _logins(getattr(args, "logins", None))
        return cls(getattr(args, "account", None) or None, since, until, logins)

    def login(self, learner: str) -> str:
        return self.logins.get(learner, learner)

    def judge_options(self, learner: str) -> list[str]:
        """The judge's command-line options for `learner`'s notebook."""
        options = ["--login", self.login(learner)]
        for name in ("account", "since", "until"):
            value = getattr(self, name)
            options += [f"--{name}", value] if value else []
        return options + (["--jobs-required"] if self.account else [])

    def describe(self, learner: str) -> str:
        """For the gradebook: what this learner's jobs were held to."""
        parts = [f"login {self.login(learner)}"]
        parts += [f"account {self.account}"] if self.account else []
        if self.since or self.until:
            parts.append(f"submitted {self.since or '...'} to {self.until or '...'}")
        return ", ".join(parts)


def _when(text: str | None, flag: str) -> str | None:
    if not text:
        return None
    if not WHEN.match(text):
        raise ValueError(
            f"{flag} {text!r}: give a date or time as sacct prints them, e.g. 2026-11-01 or "
            "2026-11-01T09:00"
        )
    return text if "T" in text else f"{text}T00:00:00"


def _logins(path: str | None) -> dict[str, str]:
    """learner -> login from a CSV file of two columns (a header line `learner,login` allowed)."""
    if not path:
        return {}
    try:
        rows = list(csv.reader(Path(path).read_text().splitlines()))
    except OSError as e:
        raise ValueError(f"--logins {path}: cannot be read ({e.strerror})") from e
    found = {}
    for number, row in enumerate(rows, start=1):
        if row == ["learner", "login"] or not row:
            continue
        if len(row) != 2 or not all(cell.strip() for cell in row):
            raise ValueError(
                f"--logins {path}, line {number}: expected two columns, learner,login (as "
                f"alice,a.smith), got {','.join(row)!r}"
            )
        found[row[0].strip()] = row[1].strip()
    return found
