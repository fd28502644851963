"""A pytest plugin for the notebook lanes: every check of the session goes through a judge, and the
session fails unless the judge's verdicts are what the lane expects.

    pytest --nbval ... -p course_utils.grading.judge.plugin --course-judge=pass solutions/
    pytest --nbval-lax ... -p course_utils.grading.judge.plugin --course-judge=none notebooks/

One judge process (process.py, with a seed: the held-out cases run too) listens for the whole
session; the kernels nbval starts inherit its socket (exercises.JUDGE_VARIABLE), so each check
cell asks it, as in `course grade`, and this pytest announces each check cell to it, as the
runner does (runner/announce.py). At the end, for every lesson whose notebook ran:
`pass` requires every exercise passed, held-out cases included (the solutions earn every
point); `none` requires that none passed (the student notebooks earn nothing), and that every
"run" exercise said "not attempted yet" (without the learner's run, a run check cannot pass or
even fail on something else). No notebook runs twice for it: the lanes run them anyway.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from course_utils.grading import exercises

SEED = 20261126  # any fixed seed: a lane's verdicts do not depend on the day
_STATE: dict = {}


def pytest_addoption(parser):
    parser.addoption(
        "--course-judge",
        choices=("pass", "none"),
        help="run every check through a judge; at the end require every exercise of the "
        "lessons run to have passed (pass) or none of them (none)",
    )


def pytest_configure(config):
    expect = config.getoption("--course-judge")
    if not expect:
        return
    from course_utils.grading.judge.beside import judge_beside
    from course_utils.grading.runner import announce
    from course_utils.grading.runner.limits import default_limits

    context = judge_beside(SEED, default_limits(600, jobs=1, sandbox=False))
    judge = context.__enter__()
    os.environ.update({name: str(path) for name, path in judge.doors().items()})
    announce.listen_on(judge.runner_end)
    config.pluginmanager.register(announce, "course-announce")
    _STATE.update(expect=expect, context=context, judge=judge, lessons=set())


def pytest_collection_modifyitems(items):
    for path in {Path(str(item.path)) for item in items}:
        found = re.match(r"(\d\d)_", path.name)
        if found and path.suffix == ".ipynb":
            _STATE.setdefault("lessons", set()).add(found[1])
            _STATE.setdefault("runs", set()).update(run_exercises(path))


def run_exercises(notebook: Path) -> set[str]:
    """The ids of the notebook's "run" exercises, from its cells' course metadata."""
    cells = json.loads(notebook.read_text()).get("cells", [])
    metas = [cell.get("metadata", {}).get("course", {}) for cell in cells]
    return {m["exercise"] for m in metas if m.get("role") == "exercise" and m.get("does") == "run"}


def pytest_sessionfinish(session, exitstatus):
    if "context" not in _STATE:
        return
    for name in _STATE["judge"].doors():
        os.environ.pop(name, None)
    _STATE["context"].__exit__(None, None, None)
    verdicts = _STATE["judge"].verdicts
    problems = unmet(_STATE["expect"], _STATE["lessons"], verdicts.lines, _STATE.get("runs", set()))
    problems += [f"the judge refused a knock: {line['why']}" for line in verdicts.refused]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.section("the judge's verdicts")
        for line in problems or [f"every exercise of {len(_STATE['lessons'])} lessons as expected"]:
            reporter.write_line(line)
    if problems and session.exitstatus == 0:
        session.exitstatus = 1


def unmet(
    expect: str, lessons: set[str], verdicts: dict[str, dict], runs: set[str] = frozenset()
) -> list[str]:
    """What the judge's verdicts miss of the expectation, one line per exercise."""
    problems = []
    for lesson in sorted(lessons):
        for ex in exercises.lesson_exercises(lesson):
            line = verdicts.get(ex.id)
            passed = line is not None and line.get("verdict") == exercises.PASSED
            held = line.get("held_out", 0) if line else 0
            all_held = passed and (line.get("held_out_passed", 0) == held)
            if expect == "pass" and not all_held:
                said = "no verdict" if line is None else f"{line['verdict']}: {line['message']}"
                if passed:
                    said = f"{line.get('held_out_passed')}/{held} held-out cases passed"
                problems.append(f"{ex.id} did not earn its point: {said}")
            if expect == "none" and passed:
                problems.append(f"{ex.id} earned its point in a notebook that should earn none")
            elif expect == "none" and ex.id in runs and line is not None:
                if line.get("verdict") != exercises.NOT_ATTEMPTED:
                    said = f"{line['verdict']}: {line['message']}"
                    problems.append(f"{ex.id} is a run, without one it says: {said}")
    return problems
