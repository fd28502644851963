"""A pytest plugin inside every run: records what nbval saw in each cell, one JSON line each.

Loaded with `pytest -p course_utils.grading.runner.nbval_record --course-record FILE --nbval ...`
in the run's subprocess, beside `course_utils.grading.runner.kernel_watch` (a dead kernel fails
its cell at once). Lines are appended as cells finish, so the results of the cells that ran are
kept even when the run is killed at the notebook's time limit. A check cell's line carries its
outputs (`outputs.recordable`): the grader compares check cells with the reference outside the
sandbox. Texts are clipped: a submission that prints 100 MB must not make the record (or the
grader's memory) 100 MB.
"""

from __future__ import annotations

import json

import pytest

from course_utils.grading.notebooks import course_meta
from course_utils.grading.runner.outputs import clip, recordable


def pytest_addoption(parser):
    parser.addoption("--course-record", help="course grade: append per-cell results to this file")


def _stream(outputs, name: str) -> str:
    return "".join(
        o.get("text", "")
        for o in outputs
        if o.get("output_type") == "stream" and o.get("name") == name
    )


def cell_record(item, call) -> dict:
    outputs = item.test_outputs or []
    errors = [o for o in outputs if o.get("output_type") == "error"]
    exc = call.excinfo.value if call.excinfo else None
    kernel = item.parent.kernel
    died = getattr(kernel, "course_died", False) and not getattr(kernel, "course_reported", False)
    if died:
        kernel.course_reported = True  # later cells report "Kernel dead on test start" instead
    return {
        "cell": item.cell_num,
        "ok": exc is None,
        "problem": clip(str(exc), 300) if exc is not None else "",
        "ename": errors[-1]["ename"] if errors else "",
        "evalue": clip(str(errors[-1]["evalue"]), 500) if errors else "",
        "stdout": clip(_stream(outputs, "stdout")),
        "stderr": clip(_stream(outputs, "stderr"), 1500),
        # only check cells are compared with the reference: a learner cell's outputs would only
        # fill the record (and could push later cells' lines past its size limit)
        "outputs": recordable(outputs) if course_meta(item.cell).get("role") == "check" else [],
        "died": died,
        # nbval words every time limit it hits "Timeout of ..."; a dead kernel looks like one
        "timed_out": "Timeout of" in str(exc) and not died,
        "seconds": round(call.duration, 3),
    }


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    path = item.config.getoption("course_record")
    if call.when != "call" or not path or not hasattr(item, "cell_num"):
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(cell_record(item, call)) + "\n")
