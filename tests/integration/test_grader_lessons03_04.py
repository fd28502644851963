"""Lessons 03 and 04 graded in the sandbox against submissions that forge the evidence of their
"run" exercises (03.4 and 04.3: the trace the learner's own profile exported) or call the
course's own answer. Each earns no point for the forged exercise, or carries a flag; the honest
exercises of the same notebooks keep theirs. (The solutions earn every point and the blank
notebooks none: checked in the same sandbox when the lessons are rebuilt.)"""

import csv

import nbformat
import pytest

from course_utils.cli import main
from course_utils.paths import REPO_ROOT
from course_utils.tooling.release import course_meta

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

LESSONS = {"03": "03_async_streams_memory", "04": "04_tf32_mixed_precision"}

# 03.4: a trace typed in by hand, with every name the check asks for, the visible batch's
# shapes and plausible times; the step handed over is run, but not profiled.
TYPED_TRACE_03 = """
import json


def most_expensive_operator(step, trace_path):
    step()
    names = ["aten::conv2d", "aten::max_pool2d", "aten::linear", "aten::cross_entropy_loss",
             "ConvolutionBackward0", "AddmmBackward0", "Optimizer.step#SGD.step"]
    events = [{"ph": "X", "cat": "cpu_op", "name": n, "ts": i * 1e4, "dur": 9e3, "pid": 1,
               "tid": 1} for i, n in enumerate(names)]
    events[0]["args"] = {"Input Dims": [[32, 3, 32, 32], [6, 3, 5, 5]]}
    with open(trace_path, "w") as f:
        json.dump({"traceEvents": events}, f)
    return "aten::conv2d"
"""

# 03.4 again, in the kernel instead of the real one: a real profile, of the lesson's own MLP
# step (defined in an earlier cell), not of the step the check handed over.
KERNELS_OWN_RUN_03 = """
def most_expensive_operator(step, trace_path):
    prof = profile_call(lambda: mlp(batch).sum().backward(), trace_path=trace_path)
    return max(prof.key_averages(), key=lambda e: e.self_cpu_time_total).key
"""

# 04.1: the course's own answer, handed out in the lesson's first cell.
LAZY_04_1 = """
def to_tf32(x):
    return rounded(x, "tf32")
"""

# 04.2: the visible errors typed in (copied from a run at the visible seed), no measurement.
TYPED_04_2 = """
VISIBLE = {
    "tf32": [0.0019191617774660232, 0.0019350600411538136, 0.0016638009227769848,
             0.0017260761309336045],
    "bf16": [0.01445147218529146, 0.012823973918488728, 0.013249053560740933,
             0.013920058945339547],
}


def error_against_n(mode, ns, seed):
    errors = VISIBLE[mode]
    return errors, power_law_fit(ns, errors)
"""

# 04.3: the step run unprofiled, and a trace written by hand with the batch's own shapes
# (read from the inputs handed over) and the dtypes the check reads.
TYPED_TRACE_04_3 = """
import json


def autocast_step(model, inputs, targets):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(inputs), targets)
    loss.backward()
    return loss


def profile_autocast_step(model, inputs, targets, trace_path):
    loss = autocast_step(model, inputs, targets)
    conv = {"Input Dims": [list(inputs.shape), [4, 3, 3, 3]],
            "Input type": ["c10::BFloat16", "c10::BFloat16"]}
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "ts": 0, "dur": 5,
               "args": conv}]
    with open(trace_path, "w") as f:
        json.dump({"traceEvents": events}, f)
    return loss
"""


def submission(lesson: str, answers: dict[str, str]) -> nbformat.NotebookNode:
    nb = nbformat.read(REPO_ROOT / "solutions" / f"{LESSONS[lesson]}.ipynb", as_version=4)
    for c in nb.cells:
        meta = course_meta(c)
        if meta.get("role") == "exercise" and meta.get("exercise") in answers:
            c.source = answers[meta["exercise"]].strip()
    return nb


def grade(tmp_path, lesson: str, learners: dict[str, dict[str, str]]) -> dict[str, dict]:
    subs, out = tmp_path / f"subs{lesson}", tmp_path / f"out{lesson}"
    for learner, answers in learners.items():
        (subs / learner).mkdir(parents=True)
        nbformat.write(submission(lesson, answers), subs / learner / f"{LESSONS[lesson]}.ipynb")
    argv = ["grade", str(subs), "--lesson", lesson, "--out", str(out), "--seed", "34", "-j", "1"]
    assert main(argv) == 0
    with open(out / "gradebook.csv", newline="") as f:
        return {row["learner"]: row for row in csv.DictReader(f)}


def test_lesson03_forged_traces_earn_no_point(tmp_path):
    rows = grade(
        tmp_path, "03", {"typed": {"03.4": TYPED_TRACE_03}, "kernel": {"03.4": KERNELS_OWN_RUN_03}}
    )
    for row in rows.values():
        assert row["sandbox"].startswith("bubblewrap"), row
        assert row["status"] == "ok", row
        assert (row["03.1"], row["03.2"], row["03.3"], row["03.4"]) == ("1", "1", "1", "0"), row
    assert "03.4: opens or removes files" in rows["typed"]["flags"]


def test_lesson04_forged_trace_and_typed_errors_earn_no_point_and_the_lazy_answer_is_flagged(
    tmp_path,
):
    rows = grade(
        tmp_path,
        "04",
        {"forger": {"04.1": LAZY_04_1, "04.2": TYPED_04_2, "04.3": TYPED_TRACE_04_3}},
    )
    row = rows["forger"]
    assert row["sandbox"].startswith("bubblewrap") and row["status"] == "ok", row
    assert (row["04.2"], row["04.3"]) == ("0", "0"), row  # 04.2: its held-out seeds
    assert "04.1: calls the course's own answer" in row["flags"], row
    assert "04.3: opens or removes files" in row["flags"], row
