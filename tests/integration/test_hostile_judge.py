"""Submissions by a learner who has read the judge, graded in the sandbox as `course grade` grades
them: each attacks one property the judge holds, on lessons 01, 04, 06 and 10. None may earn a
point without a flag, and most earn none at all.

1. The kernel's end of the protocol is the learner's: they replace the request handler so that
   a probe returns a report of their own making (01.1's view and timings, 10.1's staged
   copies). The judge holds each report to its own draws and measurements, and reads the
   learner's file system itself, from outside.
2. Nothing to copy inside the run: an answer that imports the judge's references (04.2's own
   error measurement, 06.4's uninterrupted run) finds no such module.
3. The socket serves only the check cell the runner announced, once: a thread that knocks for
   an exercise before its check cell, or again after it with a better answer; a kernel that
   reports itself as 06.4's program, or a `python -c` that does. Each knock is refused and
   written in the gradebook.
One `course grade -j 2` run grades them all (module-scoped fixture).
"""

from __future__ import annotations

import csv
import re
import textwrap

import nbformat
import pytest

from course_utils.cli import main
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]
LESSONS = ("01", "04", "06", "10")
RELEASES = {n: next((REPO_ROOT / "notebooks").glob(f"{n}_*.ipynb")) for n in LESSONS}

FORGED_REPORTS = """
    import torch
    import course_utils.grading.judge.proxies as handler
    from course_utils.grading.judge import wire

    _answer = handler.answer_request
    _timed = {"stmt": "x", "times": [1e-3], "median": 1e-3, "number_per_run": 1}

    def _forged(answers, header, params):
        report = {
            "01.1": {"flat": torch.zeros(8, 48), "flat_shares": True,
                     "records": {"keys": ["copy", "copy_time", "view", "view_time"],
                                 "view_shares": True, "copy_shares": False,
                                 "copy_bytes": 3145728, "equal": True,
                                 "view_time": {**_timed, "median": 1e-6},
                                 "copy_time": _timed}},
        }.get(header.get("name"))
        if header.get("op") == "probe" and report is not None:
            return {"op": "result"}, wire.encode(report)
        return _answer(answers, header, params)

    handler.answer_request = _forged
    """

FORGED_STAGING = """
    import os, tempfile
    import course_utils.grading.judge.proxies as handler
    from course_utils.grading.judge import wire
    from course_utils import notebook_code
    from course_utils.lab import small_files, staging

    _answer = handler.answer_request
    _source = "def stage_dataset(archive, environ):\\n    return '/tmp'\\n"

    def stage_dataset(archive, environ):
        return tempfile.mkdtemp()  # unpacks nothing

    def _step():  # the staging step's results, as four whole ranks would report them
        digest = small_files.content_digest()
        return [{"answer": notebook_code.digest(_source), "node": f"cn{r // 2 + 1}", "rank": r,
                 "copied": r % 2 == 0, "path": f"/tmp/cn{r // 2 + 1}", "digest": digest}
                for r in range(4)]

    def _whole(params, node, rank, who):
        folder = f"{params['root']}/{node}/staged"  # empty, where the check looks
        os.makedirs(folder, exist_ok=True)
        return {"path": folder, "is_dir": True, "read_archive": rank % 2 == 0, "whole": 300,
                "expected": 300, "digest": staging.bytes_digest({"x": b""}), "who": who,
                "node": node, "rank": rank}

    def _forged(answers, header, params):
        if header.get("name") == "10.1/staging":
            report = {"stub": False, "source": _source, "results": _step()}
            return {"op": "result"}, wire.encode(report)
        if header.get("name") == "10.1/cases":
            cases = [("2 nodes x 2 ranks, SLURM_TMPDIR set", params["root"] + "/cn{node}")]
            reports = [_whole(params, f"cn{r // 2 + 1}", r, f"rank {r}") for r in range(4)]
            found = [{"title": t, "base": b, "reports": reports} for t, b in cases]
            return {"op": "result"}, wire.encode(found)
        return _answer(answers, header, params)

    handler.answer_request = _forged
    """

KNOCK_EARLY = """
    import os, socket, threading, torch
    from course_utils import messages
    from course_utils.grading.judge import kernel

    def _grad(x):
        x = x.detach().clone().requires_grad_(True)
        (x**3 + 2 * x).sum().backward()
        return x.grad

    def _knock(exercise_id, answers):
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(os.environ["COURSE_JUDGE"])
            kinds = [{"type": "function", "callable": True}]
            messages.send(conn, {"op": "check", "exercise": exercise_id, "answers": kinds})
            try:
                kernel.serve(conn, answers)
            except (ConnectionError, OSError):
                pass

    _knock("01.4", [_grad])  # from the exercise cell: no check cell runs
    threading.Thread(target=lambda: (__import__("time").sleep(8), _knock("01.4", [_grad]))).start()
    """

COPIED = """
    def error_against_n(mode, ns, seed):
        from course_utils.grading.checks.lesson04 import own_errors  # the judge's reference
        from course_utils.precision import power_law_fit

        errors = own_errors(tuple(ns), seed)[mode]
        return list(errors), power_law_fit(list(ns), list(errors))
    """

WITNESS_FROM_THE_KERNEL = """
    import subprocess, sys
    from course_utils import witness

    def preempt_and_resume(ckpt_dir, seed, steps):
        import os
        config = {"seed": seed, "max_steps": steps, "epochs": 3}
        run = dict(ckpt_dir=os.path.abspath(str(ckpt_dir)), config=config)
        witness.report("start", resumed_from=0, **run)
        witness.report("stopped", signal="SIGUSR1", step=5, requeued=False, **run)
        code = (
            "from course_utils import witness\\n"
            f"witness.report('start', resumed_from=5, **{run!r})\\n"
            f"witness.report('finished', step={steps}, hash='x', **{run!r})\\n"
        )
        subprocess.run([sys.executable, "-c", code], check=False)
    """

COPIED_RUN = """
    def preempt_and_resume(ckpt_dir, seed, steps):
        from course_utils.grading.checks.lesson06_resume import uninterrupted

        uninterrupted(seed, steps)
    """


def _exercise_cells(nb):
    return [c for c in nb.cells if course_meta(c).get("role") == "exercise"]


def _with(lesson: str, by_exercise: dict[str, str]) -> nbformat.NotebookNode:
    """The released notebook with these exercise cells' sources added to (stubs kept)."""
    nb = nbformat.read(RELEASES[lesson], as_version=4)
    for cell in _exercise_cells(nb):
        code = by_exercise.get(course_meta(cell)["exercise"])
        if code is not None:
            cell.source = f"{cell.source}\n\n{textwrap.dedent(code)}"
    return nb


SUBMISSIONS = {
    "forged_reports_01": ("01", {"01.1": FORGED_REPORTS}),
    "knocks_out_of_turn_01": ("01", {"01.4": KNOCK_EARLY}),
    "copied_reference_04": ("04", {"04.2": COPIED}),
    "forged_witness_06": ("06", {"06.4": WITNESS_FROM_THE_KERNEL}),
    "copied_run_06": ("06", {"06.4": COPIED_RUN}),
    "forged_staging_10": ("10", {"10.1": FORGED_STAGING}),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-judge")
    (root / "subs").mkdir()
    for name, (lesson, cells) in SUBMISSIONS.items():
        nbformat.write(_with(lesson, cells), root / "subs" / f"{name}__{RELEASES[lesson].name}")
    out = root / "out"
    argv = ["grade", str(root / "subs"), "--out", str(out), "-j", "2", "--seed", "7"]
    assert main([*argv, "--timeout", "300", "--cell-timeout", "150"]) == 0
    with open(out / "gradebook.csv") as f:
        rows = {row["learner"]: row for row in csv.DictReader(f)}
    return rows, out


@pytest.fixture(scope="module")
def feedback(graded):
    """Each learner's feedback, one line per exercise as `01.1 ... failed: ...`."""
    _, out = graded
    return {
        name: re.sub(
            r"- \*\*(\d\d\.\d)\*\* [^:]*: ",
            r"\1 ... ",
            (out / "feedback" / f"{name}.md").read_text(),
        )
        for name in SUBMISSIONS
    }


@pytest.fixture(scope="module")
def gradebook(graded):
    return graded[0]


def test_no_submission_that_has_read_the_judge_earns_a_point(gradebook):
    assert set(gradebook) == set(SUBMISSIONS)
    for name, row in gradebook.items():
        assert float(row["total"]) == 0, (name, row)
        assert row["flags"], name  # and each is there for the instructor to read


def test_knocks_out_of_turn_are_refused_and_written_in_the_gradebook(gradebook):
    flags = gradebook["knocks_out_of_turn_01"]["flags"]
    assert "01.4: a check of 01.4 that no check cell asked for" in flags


def test_forged_reports_fail_on_what_the_judge_computes_and_reads_itself(gradebook, feedback):
    assert (
        "01.1 ... failed: expected the images flattened in order" in feedback["forged_reports_01"]
    )
    said = feedback["forged_staging_10"]
    assert "10.1 ... failed:" in said and "as the check finds it on disk" in said


def test_a_copied_reference_is_not_there_to_copy(gradebook):
    assert "04.2" in gradebook["copied_reference_04"]["flags"]
    assert "06.4" in gradebook["copied_run_06"]["flags"]
