"""What the course's exercises make the learner do (DESIGN's exercise kinds, docs/conventions.md):
at least 40 exercises, at least 20 that are "run" by the rule (the learner's own code starts,
submits or measures something real, and the check reads what that run produced: a function the
checker calls on its own inputs is "code", however much it computes), and at least one "run" in
every lesson. The labels are the honest ones (22 run, 15 code, 6 decide); fill-ins stay a
minority. Read from the solutions, as `course release` reads them."""

from collections import Counter

import nbformat
import pytest

from course_utils.grading.notebooks import DOES, course_meta
from course_utils.paths import REPO_ROOT
from course_utils.tooling.release import solution_paths

AT_LEAST_IN_ALL, AT_LEAST_RUN, AT_MOST_CODE = 40, 20, 16


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
    assert total["code"] <= AT_MOST_CODE, dict(total)


@pytest.mark.parametrize("lesson", sorted(kinds_by_lesson()))
def test_every_lesson_has_an_exercise_that_runs(lesson):
    assert kinds_by_lesson()[lesson]["run"] >= 1, dict(kinds_by_lesson()[lesson])
