"""Lesson 08's run exercises graded in the sandbox against submissions that forge the evidence
(issue 30): a loader's log written by hand, and a trace typed by hand beside a run that was not
profiled. Both earn 0 (08.1 and 08.3): the judge decides from the check's own loader log, its
own timing and the events of the trace, never from what the notebook printed. The same notebook
calls the course's own answers to 08.2 and 08.4: those points come with flags. One `course grade`
run (module-scoped)."""

import pytest
from submissions import feedback, grade_lesson

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

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
# One notebook (lesson 08's run is the course's heaviest): the lazy answers to the decisions
# ride with the forged runs, whose points they cannot touch. Typed-in rates and printed verdict
# lines are test_hostile.py's classes, graded there on lessons 01 and 04.
SUBMISSIONS = {"forged": FORGED | LAZY}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_lesson(tmp_path_factory.mktemp("grade08"), "08", SUBMISSIONS)


def test_forged_runs_earn_nothing(graded):
    rows, out = graded
    row = rows["forged"]
    assert (row["08.1"], row["08.3"]) == ("0", "0"), feedback(out, "forged")


def test_forged_evidence_fails_on_what_the_judge_reads(graded):
    _, out = graded
    text = feedback(out, "forged")
    assert "of at least the 0.08 s its batches take" in text, text
    assert "a profile within the" in text, text


def test_the_courses_own_answers_are_flagged(graded):
    rows, out = graded
    row = rows["forged"]
    assert (row["08.2"], row["08.4"]) == ("1", "1"), feedback(out, "forged")
    assert "08.2: calls the course's own answer" in row["flags"], row
    assert "08.4: calls the course's own answer" in row["flags"], row
