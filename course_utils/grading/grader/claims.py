"""One job, one exercise of one learner: the grader's last look across the whole gradebook.

Each exercise graded on Slurm's record names the jobs it rests on in its evidence ("sacct 4217:
..."). A judge sees one notebook only; here, before the gradebook is written, a job named by two
exercises, of one learner or of two, earns neither its point, and each says which other named it.
(The judge already refuses a job of another login: this catches a learner's own job named twice,
in two lessons, and one two learners share a login for.)
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace

from course_utils.grading.exercises import FAILED
from course_utils.grading.grader.gradebook import SubmissionGrade

NAMED = re.compile(r"\bsacct (\d+(?:_\d+)?)\b")


def refuse_shared_jobs(grades: list[SubmissionGrade]) -> list[SubmissionGrade]:
    """`grades` with every exercise whose evidence names a job another exercise names too
    failed, saying who else named it; the rest unchanged."""
    named = defaultdict(set)  # job id -> {(learner, exercise id)}
    for g in grades:
        for e in g.exercises:
            for job in NAMED.findall(e.evidence):
                named[job].add((g.learner, e.exercise_id))
    shared = {job: who for job, who in named.items() if len(who) > 1}
    if not shared:
        return grades
    for g in grades:
        g.exercises = [_refused(g.learner, e, shared) for e in g.exercises]
    return grades


def _refused(learner: str, exercise, shared: dict[str, set]):
    for job in NAMED.findall(exercise.evidence):
        others = sorted(shared.get(job, set()) - {(learner, exercise.exercise_id)})
        if others:
            who = ", ".join(f"{name}'s {ex_id}" for name, ex_id in others)
            return replace(
                exercise,
                verdict=FAILED,
                message=f"job {job} is named by {who} too: a job serves one exercise of one "
                "learner",
            )
    return exercise
