"""What the course's exercises make the learner do (the exercise kinds, docs/conventions.md):
at least 40 exercises, at least 15 that are "run" by the rule (the points rest on the learner's
own run: a job of theirs on the scheduler's record, or their own code started, built or
measured at the judge's seed; an answer whose run a course helper does in full is "code"), and
at least one "run" in every lesson. Fill-ins ("code") stay a minority. Read from the solutions,
as `course release` reads them."""

from collections import Counter

import nbformat
import pytest

from course_utils.grading.notebooks import DOES, course_meta
from course_utils.paths import REPO_ROOT
from course_utils.tooling.release import solution_paths

AT_LEAST_IN_ALL, AT_LEAST_RUN = 40, 15


def kinds_by_lesson() -> dict[str, Counter]:
    found = {}
    for path in solution_paths(REPO_ROOT / "solutions"):
        cells = nbformat.read(path, as_version=4).cells
        metas = [course_meta(c) for c in cells]
        found[path.name[:2]] = Counter(m["does"] for m in metas if m.get("role") == "exercise")
    return found


def test_every_exercise_says_a_known_kind():
    for lesson, kinds in kinds_by_lesson().items():
        assert set(kinds) <= set(DOES), f"lesson {lesson}: {dict(kinds)}"


def test_the_course_counts_hold():
    total = sum(kinds_by_lesson().values(), Counter())
    assert sum(total.values()) >= AT_LEAST_IN_ALL, dict(total)
    assert total["run"] >= AT_LEAST_RUN, dict(total)
    assert 2 * total["code"] < sum(total.values()), dict(total)  # a minority


@pytest.mark.parametrize("lesson", sorted(kinds_by_lesson()))
def test_every_lesson_has_an_exercise_that_runs(lesson):
    assert kinds_by_lesson()[lesson]["run"] >= 1, dict(kinds_by_lesson()[lesson])
