"""Grades kept one file per submission, keyed by content: what lets `course grade --slurm` resume.

A result's key is a digest of the learner, the lesson, the submitted file's bytes and what the
grade depends on besides (`grading_context`: the lesson's solution notebook and checkers, the
held-out seed, the limits given on the command line). So an unchanged submission graded with
the same settings finds its result and is not graded again; a changed one (or a new seed, a new
solution) has a new key and is. Results are JSON files in OUT/results/, written atomically as
each submission is done, so a task cancelled halfway keeps what it finished. A result whose
status is `error` (the grader failed, not the submission) counts as missing.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import asdict
from pathlib import Path

from course_utils.files import atomic_write_text
from course_utils.grading.grader.gradebook import ERROR, ExerciseGrade, SubmissionGrade
from course_utils.grading.grader.submissions import Submission

FOLDER = "results"  # under the output folder
SEED_FILE = "seed"  # in it: the held-out seed the results were graded with


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def grading_context(
    seed: int, options: dict, lesson_files: dict[str, list[Path]]
) -> dict[str, str]:
    """Lesson -> a digest of everything besides the submission that its grade depends on:
    the seed, the limits' options as given, and the lesson's own files (solution, checkers)."""
    shared = json.dumps({"seed": seed, "options": options}, sort_keys=True)
    return {
        lesson: _digest(shared, *(file_digest(p) for p in sorted(files)))
        for lesson, files in lesson_files.items()
    }


def result_key(sub: Submission, content: str, context: str) -> str:
    """The key of `sub`'s result: its learner, lesson, content digest and grading context."""
    return _digest(sub.learner, sub.lesson, content, context)[:40]


def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def to_do(keys: dict[Submission, str], graded: set[str]) -> tuple[list[Submission], int]:
    """(the submissions that have no result yet, how many have one), in submission order."""
    missing = [sub for sub, key in keys.items() if key not in graded]
    return missing, len(keys) - len(missing)


def choose_seed(given: int | None, stored: int | None) -> int:
    """The held-out seed: the one given, else the one earlier results used, else a new one."""
    if given is not None:
        return given
    return stored if stored is not None else secrets.randbelow(2**31)


def grade_to_json(grade: SubmissionGrade, key: str) -> str:
    return json.dumps({"key": key, "grade": asdict(grade)}, indent=1) + "\n"


def grade_from_json(text: str) -> tuple[str, SubmissionGrade]:
    """(key, grade) from a result file's text; ValueError when it is not one."""
    try:
        data = json.loads(text)
        fields = dict(data["grade"])
        fields["exercises"] = [ExerciseGrade(**e) for e in fields["exercises"]]
        return data["key"], SubmissionGrade(**fields)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"not a result file: {type(e).__name__}: {e}") from e


class Store:
    """OUT/results/: one file per result, `<key>.json`, and the seed they were graded with."""

    def __init__(self, out: Path):
        self.folder = Path(out) / FOLDER

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def save(self, key: str, grade: SubmissionGrade) -> None:
        atomic_write_text(self.path(key), grade_to_json(grade, key))

    def load(self, key: str) -> SubmissionGrade | None:
        """The result under `key`; None when there is none or it is unreadable."""
        try:
            found, grade = grade_from_json(self.path(key).read_text())
        except (OSError, ValueError):
            return None
        return grade if found == key else None

    def graded(self, keys) -> set[str]:
        """Those of `keys` that have a result to keep: not one where the grader failed
        (status error), which is graded again."""
        return {key for key in keys if (g := self.load(key)) is not None and g.status != ERROR}

    def seconds_by_lesson(self) -> dict[str, list[float]]:
        """Lesson -> the grading seconds of every result kept (for sharing out the next run)."""
        found: dict[str, list[float]] = {}
        for path in sorted(self.folder.glob("*.json")):
            try:
                _, grade = grade_from_json(path.read_text())
            except (OSError, ValueError):
                continue
            found.setdefault(grade.lesson, []).append(grade.seconds)
        return found

    def seed(self) -> int | None:
        try:
            return int((self.folder / SEED_FILE).read_text())
        except (OSError, ValueError):
            return None

    def keep_seed(self, seed: int) -> None:
        atomic_write_text(self.folder / SEED_FILE, f"{seed}\n")
