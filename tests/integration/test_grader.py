"""`course grade` against honest and adversarial submissions, all generated from lesson 01.

One `course grade -j 2` run grades every submission (module-scoped fixture); the tests then read
its gradebook, feedback and JUnit report. Small time limits keep it bounded.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import psutil
import pytest

from course_utils.grading import grader
from course_utils.grading.release import course_meta
from course_utils.paths import REPO_ROOT

SOLUTION = REPO_ROOT / "solutions" / "01_tensors.ipynb"
RELEASE = REPO_ROOT / "notebooks" / "01_tensors.ipynb"
CELL_TIMEOUT, NOTEBOOK_TIMEOUT = 10, 60


def solution() -> nbformat.NotebookNode:
    return nbformat.read(SOLUTION, as_version=4)


def cell(nb, exercise: str, role: str = "exercise"):
    return next(
        c
        for c in nb.cells
        if (course_meta(c).get("exercise"), course_meta(c).get("role")) == (exercise, role)
    )


def with_answer(nb, exercise: str, source: str):
    cell(nb, exercise).source = source
    return nb


def make_submissions(folder: Path, outside: Path) -> dict[str, nbformat.NotebookNode | str]:
    """Learner name -> notebook (or raw text), each exercising one way a submission goes wrong."""
    subs = {"full": solution(), "empty": nbformat.read(RELEASE, as_version=4)}

    nb = solution()  # cells in reverse order; a wrong answer; a print during a check
    with_answer(nb, "01.3", "def to_numpy(t):\n    return t.detach().clone().numpy()")
    with_answer(
        nb,
        "01.2",
        "def standardize(x):\n    print('debug', x.shape)\n"
        "    return (x - x.mean(0)) / x.std(0, unbiased=False)",
    )
    nb.cells.reverse()
    subs["partial"] = nb

    nb = nbformat.read(RELEASE, as_version=4)  # copies 01.1 out of solutions/, writes outside its
    cell(nb, "01.1").source = (  # folder, and edits check cells to pass stubs anyway
        "import json\nfrom course_utils.paths import REPO_ROOT\n"
        "_nb = json.load(open(REPO_ROOT / 'solutions' / '01_tensors.ipynb'))\n"
        "exec(next(''.join(c['source']) for c in _nb['cells']\n"
        "          if c['metadata'].get('course', {}).get('role') == 'exercise'))\n"
        f"open({str(outside)!r}, 'w').write('written by a submission')"
    )
    cell(
        nb, "01.2", "check"
    ).source = 'check("01.2", lambda x: (x - x.mean(0)) / x.std(0, unbiased=False))'
    cell(nb, "01.3", "check").source = 'print("[01.3] passed: works on tensors that require grad")'
    cell(nb, "01.4").source = (
        "check = lambda *a: print('[01.4] passed: d/dx sum(x^3 + 2x) = "
        "3x^2 + 2, computed by autograd')"
    )
    subs["cheat"] = nb

    nb = solution()  # 01.4 deleted; 01.1 duplicated, a wrong copy first; saved as nbformat 3
    nb.cells.remove(cell(nb, "01.4"))
    wrong = nbformat.from_dict(cell(nb, "01.1"))
    wrong.id = "copy"
    wrong.source = "def batch_flatten(images):\n    return images.clone().flatten(1)"
    nb.cells.insert(0, wrong)
    subs["old"] = nbformat.writes(nbformat.convert(nb, 3), version=3)

    nb = solution()  # 100 MB of output; sys.exit at top level and inside a function; os._exit
    cell(nb, "01.1").source += "\nprint('x' * 100_000_000)\nimport sys\nsys.exit()"
    with_answer(nb, "01.2", "import sys\ndef standardize(x):\n    sys.exit(3)")
    cell(nb, "01.4").source = "import os\nos._exit(1)"
    subs["exits"] = nb

    nb = solution()  # a segfault inside the checked function
    with_answer(nb, "01.3", "import ctypes\ndef to_numpy(t):\n    return ctypes.string_at(0)")
    subs["crash"] = nb

    nb = solution()  # an interruptible loop in a check, then a loop that swallows interrupts
    with_answer(nb, "01.2", "def standardize(x):\n    while True:\n        pass")
    cell(nb, "01.4").source = (
        "import time\nwhile True:\n    try:\n        time.sleep(0.1)\n"
        "    except BaseException:\n        pass"
    )
    subs["loop"] = nb

    subs["broken"] = nbformat.writes(solution())[:-200]  # malformed JSON
    folder.mkdir(parents=True)
    for name, nb in subs.items():
        text = nb if isinstance(nb, str) else nbformat.writes(nb)
        if name in ("full", "empty"):  # the folder-per-learner layout
            (folder / name).mkdir()
            (folder / name / "01_tensors.ipynb").write_text(text)
        else:  # the flat layout
            (folder / f"{name}__01_tensors.ipynb").write_text(text)
    return subs


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("grade")
    outside = root / "outside.txt"
    make_submissions(root / "subs", outside)
    before = {p.pid for p in psutil.process_iter()}
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "course_utils.cli",
            "grade",
            str(root / "subs"),
            "--out",
            str(root / "out"),
            "-j",
            "2",
            "--timeout",
            str(NOTEBOOK_TIMEOUT),
            "--cell-timeout",
            str(CELL_TIMEOUT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    seconds = time.perf_counter() - start
    with open(root / "out" / "gradebook.csv") as f:
        rows = {r["learner"]: r for r in csv.DictReader(f)}
    leftover = [
        p
        for p in psutil.process_iter()
        if p.pid not in before and "ipykernel" in " ".join(_cmdline(p))
    ]
    return {
        "proc": proc,
        "rows": rows,
        "out": root / "out",
        "seconds": seconds,
        "outside": outside,
        "leftover": leftover,
    }


def _cmdline(p) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def points(row) -> dict[str, int]:
    return {k: int(row[k]) for k in ("01.1", "01.2", "01.3", "01.4")}


def feedback(graded, learner) -> str:
    return (graded["out"] / "feedback" / f"{learner}.md").read_text()


def test_the_run_completes_and_the_gradebook_is_complete(graded):
    assert graded["proc"].returncode == 0, graded["proc"].stderr[-3000:]
    assert set(graded["rows"]) == {
        "full",
        "empty",
        "partial",
        "cheat",
        "old",
        "exits",
        "crash",
        "loop",
        "broken",
    }
    assert graded["seconds"] < 280  # bounded: 9 notebooks at -j 2 take about 80 s on 2 free cores
    assert "graded 9 submissions" in graded["proc"].stdout
    assert not graded["leftover"], "grading kernels left running"


def test_honest_submissions(graded):
    rows = graded["rows"]
    assert (rows["full"]["total"], rows["full"]["max"], rows["full"]["status"]) == ("4", "4", "ok")
    assert (rows["empty"]["total"], rows["empty"]["status"]) == ("0", "ok")
    assert "not attempted yet" in feedback(graded, "empty")
    assert points(rows["partial"]) == {"01.1": 1, "01.2": 0, "01.3": 0, "01.4": 1}
    text = feedback(graded, "partial")
    assert "a copy (use .numpy())" in text
    assert "output differs from the reference" in text and "debug" in text  # as nbval saw it


def test_edited_check_cells_do_not_count_and_snooping_is_flagged(graded):
    row = graded["rows"]["cheat"]
    assert points(row) == {"01.1": 1, "01.2": 0, "01.3": 0, "01.4": 0}
    assert row["status"] == "ok"
    assert "01.1: mentions solutions/" in row["flags"]
    assert "01.1: opens or removes files" in row["flags"]
    assert "01.4: touches the grading machinery" in row["flags"]
    assert graded["outside"].read_text() == "written by a submission"  # no filesystem sandbox


def test_old_format_with_deleted_and_duplicated_cells(graded):
    row = graded["rows"]["old"]
    assert points(row) == {"01.1": 1, "01.2": 1, "01.3": 1, "01.4": 0}
    text = feedback(graded, "old")
    assert "exercise 01.4: no exercise cell found" in text
    assert "exercise 01.1: 2 cells carry this id" in text


def test_exits_crashes_and_floods_get_a_status_and_keep_earlier_points(graded):
    exits, crash = graded["rows"]["exits"], graded["rows"]["crash"]
    assert points(exits) == {"01.1": 1, "01.2": 0, "01.3": 1, "01.4": 0}
    assert exits["status"] == "crashed" and "exercise 01.4" in exits["reason"]
    assert "sys.exit(3)" in feedback(graded, "exits")
    assert (graded["out"] / "logs" / "exits__01.log").stat().st_size < 100_000
    assert points(crash) == {"01.1": 1, "01.2": 1, "01.3": 0, "01.4": 0}
    assert crash["status"] == "crashed" and "check of 01.3" in crash["reason"]


def test_endless_loops_are_cut_off(graded):
    row = graded["rows"]["loop"]
    assert row["status"] == "timeout" and "check of 01.2" in row["reason"]
    assert points(row) == {"01.1": 1, "01.2": 0, "01.3": 1, "01.4": 0}
    assert f"did not finish within {CELL_TIMEOUT} s" in feedback(graded, "loop")


def test_unreadable_notebook(graded):
    row = graded["rows"]["broken"]
    assert (row["status"], row["total"]) == ("unreadable", "0")
    assert "not a readable notebook" in row["reason"]


def test_junit_report(graded):
    root = ET.parse(graded["out"] / "junit.xml").getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert suites["full.01"].get("failures") == "0"
    assert suites["partial.01"].get("failures") == "2"
    assert len(suites) == 9


def test_find_submissions_both_layouts(tmp_path):
    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "01_tensors.ipynb").write_text("{}")
    (tmp_path / "ann" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "bo__01_tensors.ipynb").write_text("{}")
    (tmp_path / "bo__02_gpu.ipynb").write_text("{}")
    (tmp_path / "stray.ipynb").write_text("{}")
    subs, skipped = grader.find_submissions(tmp_path, "01")
    assert [(s.learner, s.lesson) for s in subs] == [("ann", "01"), ("bo", "01")]
    assert skipped == [f"skipped {tmp_path / 'stray.ipynb'}: name it <learner>__NN_topic.ipynb"]
    with pytest.raises(ValueError, match="does not exist"):
        grader.find_submissions(tmp_path / "nope")


def test_read_notebook_rejects_oversized_and_malformed(tmp_path):
    path = tmp_path / "a.ipynb"
    path.write_text(nbformat.writes(solution()))
    with pytest.raises(ValueError, match="over the 0 MB limit; clear the outputs"):
        grader.read_notebook(path, max_bytes=100)
    path.write_text('{"cells": [')
    with pytest.raises(ValueError, match="not a readable notebook"):
        grader.read_notebook(path)
