"""Lesson 08's run exercises graded in the sandbox against submissions that forge the evidence
(issue 30): a rate typed in and a verdict line printed, a name guessed without a profile; a
loader's log written by hand, and a trace typed by hand beside a run that was not profiled.
Each earns 0 for 08.1 and 08.3: the judge decides from the check's own loader log, its own
timing and the events of the trace, never from what the notebook printed. A third submission
calls the course's own answers to 08.2 and 08.4: its points come with flags. One `course grade`
run grades them all (module-scoped)."""

import csv

import nbformat
import pytest

from course_utils.cli import main
from course_utils.paths import REPO_ROOT
from course_utils.tooling.release import course_meta

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]
LESSON = "08_making_training_fast.ipynb"

TYPED = {  # a rate typed in, verdict lines printed; a name guessed without a profile
    "08.1": """
def time_loader(loader, batches):
    print("[08.1] passed: exactly 4 batches (22 images) taken")
    return 268.0
""",
    "08.3": """
def name_the_bottleneck(model, loader, optimizer, trace_path):
    print("[08.3] passed: your traces of the check's jobs, each named right")
    return "loader" if loader.batch_size < 64 else "compute"
""",
}
FORGED = {  # the loader's log written by hand; a trace typed by hand beside an unprofiled run
    "08.1": """
def time_loader(loader, batches):
    now = time.perf_counter()
    loader.passes.append(now - 0.08)
    for i, size in enumerate(loader.sizes[:batches]):
        loader.handed.append((size, now - 0.06 + 0.02 * i))
    return sum(loader.sizes[:batches]) / 0.08
""",
    "08.3": """
def name_the_bottleneck(model, loader, optimizer, trace_path):
    import json
    profiling.documentation_loop(model, loader, optimizer, steps=2)
    slow = loader.batch_size < 64
    events = [{"ph": "X", "name": "enumerate(DataLoader)#x.__next__", "cat": "cpu_op",
               "ts": i * 5e5, "dur": 4e5 if slow else 1e3} for i in range(2)]
    events.append({"ph": "X", "name": "aten::convolution_backward", "cat": "cpu_op",
                   "ts": 1.9e6, "dur": 1e5})
    with open(trace_path, "w") as f:
        json.dump({"traceEvents": events}, f)
    return "loader" if slow else "compute"
""",
}
LAZY = {  # the course's own answers to the two decisions
    "08.2": """
def bottleneck(loader_rate, compute_rate, measured_rate):
    return speed.bottleneck(loader_rate, compute_rate, measured_rate)
""",
    "08.4": """
def gpus_to_ask_for(rates, work, deadline_hours, min_efficiency=0.8):
    from course_utils import how_many
    choice = how_many.choose(rates, work, deadline_hours, min_efficiency)
    return choice.gpus, choice.meets_deadline
""",
}
SUBMISSIONS = {"typed": TYPED, "forged": FORGED, "lazy": LAZY}


def submission(answers: dict) -> nbformat.NotebookNode:
    """The released notebook with `answers` in their exercise cells, the rest left as stubs."""
    nb = nbformat.read(REPO_ROOT / "notebooks" / LESSON, as_version=4)
    for cell in nb.cells:
        meta = course_meta(cell)
        if meta.get("role") == "exercise" and meta.get("exercise") in answers:
            cell.source = answers[meta["exercise"]].strip()
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("grade08")
    subs, out = root / "subs", root / "out"
    subs.mkdir()
    for learner, answers in SUBMISSIONS.items():
        nbformat.write(submission(answers), subs / f"{learner}__{LESSON}")
    assert main(["grade", str(subs), "--out", str(out), "--lesson", "08", "-j", "2"]) == 0
    with open(out / "gradebook.csv", newline="") as f:
        rows = {r["learner"]: r for r in csv.DictReader(f)}
    return rows, out


def feedback(out, learner) -> str:
    return (out / "feedback" / f"{learner}.md").read_text()


@pytest.mark.parametrize("learner", ["typed", "forged"])
def test_forged_runs_earn_nothing(graded, learner):
    rows, out = graded
    row = rows[learner]
    assert (row["08.1"], row["08.3"]) == ("0", "0"), feedback(out, learner)


def test_typed_answers_are_not_attempted_runs(graded):
    _, out = graded
    text = feedback(out, "typed")
    assert "run the loader first" in text and "run the jobs first" in text, text


def test_forged_evidence_fails_on_what_the_judge_reads(graded):
    _, out = graded
    text = feedback(out, "forged")
    assert "of at least the 0.08 s its batches take" in text, text
    assert "a profile within the" in text, text


def test_the_courses_own_answers_are_flagged(graded):
    rows, out = graded
    row = rows["lazy"]
    assert (row["08.2"], row["08.4"]) == ("1", "1"), feedback(out, "lazy")
    assert "08.2: calls the course's own answer" in row["flags"], row
    assert "08.4: calls the course's own answer" in row["flags"], row
