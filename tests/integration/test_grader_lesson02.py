"""Lesson 02's run exercises graded in the sandbox against submissions that forge the evidence
(issue 30): a record typed in and a verdict line printed, a run in the kernel on the lesson's own
data set instead of the one the check hands over, a step log written by hand, worker counts
named but never started. Each earns 0 for 02.2 and 02.3: the judge decides from what it measures
and from what the check's own step and data set logged, never from what the notebook printed.
(A run timing the lesson's step instead of the check's: tests/grading/checks/test_lesson02.py.)
One `course grade` run grades them all (module-scoped)."""

import pytest
from submissions import feedback, grade_lesson

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

TYPED = {  # a record typed in, a verdict line printed; a run of the lesson's own data set
    "02.2": """
def thread_rates(step, batch_size):
    print("[02.2] passed: every count of cpu_sweep.counts measured on the step")
    return {1: 4855.0, 2: 8760.0}
""",
    "02.3": """
def loader_rates(dataset, batch_size):  # measured in the kernel, on the lesson's data set
    return data.loader_rates(train_set, batch_size, workers=cpu_sweep.counts(2, start=0))
""",
}
FORGED = {  # a step log written by hand; every worker count named, all read without workers
    "02.2": """
def thread_rates(step, batch_size):
    rates = {}
    for n in cpu_sweep.counts(hpc.allocated_cpus()):
        step.calls.extend([(n, 1e-5)] * 5)
        rates[n] = batch_size / 1e-5
    return rates
""",
    "02.3": """
def loader_rates(dataset, batch_size):
    rates = {}
    for count in cpu_sweep.counts(hpc.allocated_cpus(), start=0):
        loader = data.make_loader(dataset, batch_size=batch_size, num_workers=0)
        start = time.perf_counter()
        images = sum(len(x) for x, _ in loader)
        rates[count] = images / (time.perf_counter() - start)
    return rates
""",
}
SUBMISSIONS = {"typed": TYPED, "forged": FORGED}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_lesson(tmp_path_factory.mktemp("grade02"), "02", SUBMISSIONS)


@pytest.mark.parametrize("learner", sorted(SUBMISSIONS))
def test_forged_evidence_earns_no_point(graded, learner):
    rows, out = graded
    row = rows[learner]
    assert row["sandbox"].startswith("bubblewrap"), row
    assert (row["02.2"], row["02.3"], row["total"]) == ("0", "0", "0"), feedback(out, learner)


def test_each_forgery_is_told_what_the_check_found(graded):
    _, out = graded
    typed = feedback(out, "typed")
    assert "run the step first" in typed and "run the loaders first" in typed
    forged = feedback(out, "forged")
    assert "as the check timed the same step" in forged
    assert "num_workers=1: the data set read in full by a loader with 1 worker(s)" in forged
