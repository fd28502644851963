"""Lessons 03 and 04 graded in the sandbox against submissions that forge the evidence of their
"run" exercises (03.4 and 04.3: the trace the learner's own profile exported) or call the
course's own answer. Each earns no point for the forged exercise, or carries a flag; the honest
exercises of the same notebooks keep theirs. (The solutions earn every point and the blank
notebooks none: checked in the same sandbox when the lessons are rebuilt.)"""

import pytest
from submissions import grade, with_answers

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


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


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """Both lessons' forgers, graded in one run (the solutions' other answers kept)."""
    learners = {
        "typed": ("03", with_answers("03", {"03.4": TYPED_TRACE_03}, "solutions")),
        "kernel": ("03", with_answers("03", {"03.4": KERNELS_OWN_RUN_03}, "solutions")),
        "forger": (
            "04",
            with_answers(
                "04",
                {"04.1": LAZY_04_1, "04.2": TYPED_04_2, "04.3": TYPED_TRACE_04_3},
                "solutions",
            ),
        ),
    }
    found, _ = grade(tmp_path_factory.mktemp("grade03_04"), learners, "--seed", "34")
    return found


def test_lesson03_forged_traces_earn_no_point(rows):
    for learner in ("typed", "kernel"):
        row = rows[learner]
        assert row["sandbox"].startswith("bubblewrap"), row
        assert row["status"] == "ok", row
        assert (row["03.1"], row["03.2"], row["03.3"], row["03.4"]) == ("1", "1", "1", "0"), row
    assert "03.4: opens or removes files" in rows["typed"]["flags"]


def test_lesson04_forged_trace_and_typed_errors_earn_no_point_and_the_lazy_answer_is_flagged(
    rows,
):
    row = rows["forger"]
    assert row["sandbox"].startswith("bubblewrap") and row["status"] == "ok", row
    assert (row["04.2"], row["04.3"]) == ("0", "0"), row  # 04.2: its held-out seeds
    assert "04.1: calls the course's own answer" in row["flags"], row
    assert "04.3: opens or removes files" in row["flags"], row
