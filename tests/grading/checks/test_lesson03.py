"""Each lesson-03 checker passes the reference answer, fails a known-wrong one, spots a stub.

03.1, 03.2 and 03.3 are verified against course_utils.async_gpu.async_model (a simulated device
with its log, a simulated training step and a recording stand-in for torch.cuda);
test_async_model.py tests that model, and the gpu-marked test below runs the reference answers on
a real GPU. 03.4 profiles a real training step on this CPU and reads the trace it exported.
"""

import functools
import json
import re
import time
from pathlib import Path

import pytest
import torch

from course_utils import timing
from course_utils.grading import FAILED, NOT_ATTEMPTED, PASSED, run_check
from course_utils.grading.checks import lesson03, lesson03_references
from course_utils.profiling import operator_self_times, profile_call, read_trace

# The judge's own profile and timing of a step depend on its batch and seed alone: measured
# once here for every test of 03.4 (a judge grades one notebook; each test would measure again).
_OWN_OPERATORS = functools.cache(lesson03_references.own_operators)
_OWN_STEP_SECONDS = functools.cache(lesson03_references.own_step_seconds)


@pytest.fixture(autouse=True)
def judge_measures_each_step_once(monkeypatch):
    monkeypatch.setattr(lesson03, "own_operators", _OWN_OPERATORS)
    monkeypatch.setattr(lesson03, "own_step_seconds", _OWN_STEP_SECONDS)


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: ...")


def time_call(fn, device=torch.cuda, clock=time.perf_counter):
    device.synchronize()
    start = clock()
    fn()
    device.synchronize()
    return clock() - start


def time_call_with_events(fn, device=torch.cuda, clock=time.perf_counter):
    start, end = device.Event(enable_timing=True), device.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000


def time_call_naive(fn, device=torch.cuda, clock=time.perf_counter):
    start = clock()
    fn()
    return clock() - start


def time_call_no_initial_sync(fn, device=torch.cuda, clock=time.perf_counter):
    start = clock()
    fn()
    device.synchronize()
    return clock() - start


def time_call_events_in_ms(fn, device=torch.cuda, clock=time.perf_counter):
    return time_call_with_events(fn, device, clock) * 1000


def time_call_events_without_waiting(fn, device=torch.cuda, clock=time.perf_counter):
    start, end = device.Event(enable_timing=True), device.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    return start.elapsed_time(end) / 1000


def time_call_typed(fn, device=torch.cuda, clock=time.perf_counter):
    fn()
    return 0.25  # a figure copied from somewhere, not measured


def time_call_twice(fn, device=torch.cuda, clock=time.perf_counter):
    device.synchronize()
    start = clock()
    fn()
    fn()
    device.synchronize()
    return clock() - start  # two calls timed


def side_stream_reduce(A, s, cuda=torch.cuda, reduce=torch.sum):
    s.wait_stream(cuda.current_stream())
    with cuda.stream(s):
        B = reduce(A)
    A.record_stream(s)
    B.record_stream(cuda.current_stream())
    cuda.current_stream().wait_stream(s)
    return B


def side_stream_sum(A, s, cuda=torch.cuda):
    return side_stream_reduce(A, s, cuda)


# The course's own earlier answer: it recorded A's use on the side stream, not the default
# stream's use of B, whose memory the side stream's allocator may then hand out again.
def side_stream_sum_without_b_record(A, s, cuda=torch.cuda):
    s.wait_stream(cuda.current_stream())
    with cuda.stream(s):
        B = torch.sum(A)
    A.record_stream(s)
    cuda.current_stream().wait_stream(s)
    return B


def side_stream_sum_racing(A, s, cuda=torch.cuda):  # the CUDA notes' incorrect example
    with cuda.stream(s):
        B = torch.sum(A)
    return B


def side_stream_sum_no_record(A, s, cuda=torch.cuda):
    s.wait_stream(cuda.current_stream())
    with cuda.stream(s):
        B = torch.sum(A)
    cuda.current_stream().wait_stream(s)
    return B


def side_stream_sum_synchronize(A, s, cuda=torch.cuda):  # correct, if slower
    cuda.synchronize()
    with cuda.stream(s):
        B = torch.sum(A)
    cuda.synchronize()
    B.record_stream(cuda.current_stream())  # the host waited, but the caller's use comes later
    return B


def side_stream_sum_of_a_float(A, s, cuda=torch.cuda):
    return side_stream_sum(A, s, cuda).item()


def side_stream_mean(A, s, cuda=torch.cuda):
    return side_stream_reduce(A, s, cuda, torch.mean)


def images_per_second(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
    for batch in batches[:warmup]:
        train_step(batch)
    synchronize()
    start = clock()
    for batch in batches[warmup:]:
        train_step(batch)
    synchronize()
    return sum(len(b) for b in batches[warmup:]) / (clock() - start)


def as_found(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
    start = clock()
    for batch in batches:
        train_step(batch)
    return sum(len(b) for b in batches) / (clock() - start)


def _variant(*, warmup_sync=True, per_step_sync=False, end_sync=True, count=None, offset=0):
    """images_per_second with one known mistake; `count` replaces the image count."""

    def answer(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
        for batch in batches[: warmup + offset]:
            train_step(batch)
        if warmup_sync:
            synchronize()
        start = clock()
        for batch in batches[warmup + offset :]:
            train_step(batch)
            if per_step_sync:
                synchronize()
        if end_sync:
            synchronize()
        images = count(batches, warmup) if count else sum(len(b) for b in batches[warmup:])
        return images / (clock() - start)

    return answer


def uses_perf_counter(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
    for batch in batches[:warmup]:
        train_step(batch)
    synchronize()
    start = time.perf_counter()  # not the clock it was given
    for batch in batches[warmup:]:
        train_step(batch)
    synchronize()
    return sum(len(b) for b in batches[warmup:]) / (time.perf_counter() - start)


def skips_the_last_batch(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
    return images_per_second(train_step, batches[:-1], synchronize, clock, warmup)


def _top_operator(prof) -> str:
    operators = [row for row in prof.key_averages() if not row.is_user_annotation]
    return max(operators, key=lambda row: row.self_cpu_time_total).key


def most_expensive_operator(step, trace_path):  # the solution's
    return _top_operator(profile_call(step, trace_path=trace_path))


def most_expensive_operator_with_the_profiler(step, trace_path):  # torch.profiler itself
    from torch.profiler import profile

    with profile(record_shapes=True) as prof:
        step()
    prof.export_chrome_trace(str(trace_path))
    return _top_operator(prof)


def with_the_regions(step, trace_path):  # every row of the table, annotated regions too
    prof = profile_call(step, trace_path=trace_path)
    return max(prof.key_averages(), key=lambda e: e.self_cpu_time_total).key


def by_total_time(step, trace_path):
    prof = profile_call(step, trace_path=trace_path)
    return max(prof.key_averages(), key=lambda e: e.cpu_time_total).key


def names_a_region(step, trace_path):
    profile_call(step, trace_path=trace_path)
    return next(e["name"] for e in read_trace(trace_path) if e["name"].startswith("Optimizer.step"))


def without_a_trace(step, trace_path):
    return most_expensive_operator(step, Path(trace_path).with_name("elsewhere.json"))


def profiles_something_else(step, trace_path):
    a = torch.randn(256, 256)
    return most_expensive_operator(lambda: a @ a, trace_path)


def profiles_the_forward_only(step, trace_path):
    from course_utils.models import Net

    step()  # called, but outside the profile
    net, images = Net(), torch.randn(32, 3, 32, 32)
    with torch.no_grad():
        profile_call(net, images, trace_path=trace_path)
    return "aten::conv2d"


def without_shapes(step, trace_path):
    from torch.profiler import profile

    with profile() as prof:
        step()
    prof.export_chrome_trace(str(trace_path))
    return max(prof.key_averages(), key=lambda e: e.self_cpu_time_total).key


@pytest.mark.parametrize(
    ("exercise_id", "answer"),
    [
        ("03.1", time_call),
        ("03.1", time_call_with_events),
        ("03.2", side_stream_sum),
        ("03.2", side_stream_sum_synchronize),
        ("03.3", images_per_second),
        ("03.3", timing.images_per_second),
        ("03.4", most_expensive_operator),
        ("03.4", most_expensive_operator_with_the_profiler),
    ],
)
def test_reference_answers_pass(exercise_id, answer):
    result = run_check(exercise_id, answer)
    assert result.verdict == PASSED, result.message


@pytest.mark.parametrize(
    ("exercise_id", "answer", "message"),
    [
        (
            "03.1",
            time_call_naive,
            r"an idle simulated GPU: expected the seconds of one call on the device, 0.25001, got "
            r"1e-05: the clock stopped 0.25 s before the call's device work ended: synchronize",
        ),
        (
            "03.1",
            time_call_no_initial_sync,
            r"busy with earlier work: .*device, 0.25 or 0.25001, got 1.25: the device was still "
            r"busy with earlier work when the clock started \(1 s of it were counted\)",
        ),
        ("03.1", time_call_events_in_ms, r"got 250.01: elapsed_time\(\) returns milliseconds"),
        ("03.1", time_call_events_without_waiting, r"RuntimeError: .*device not ready"),
        ("03.1", time_call_typed, r"got 0.25: 0.25 is no interval this device recorded"),
        ("03.1", time_call_twice, r"2 calls of the call between the two readings"),
        ("03.2", side_stream_sum_racing, r"expected no race, got the side stream may read A bef"),
        ("03.2", side_stream_sum_no_record, r"got A may be freed.*call A.record_stream\(s\)"),
        (
            "03.2",
            side_stream_sum_without_b_record,
            r"got the sum result may be freed and its memory reused while the default stream "
            r"still reads it: call .record_stream\(cuda.current_stream\(\)\) on the sum result$",
        ),
        ("03.2", side_stream_sum_of_a_float, r"a 3 x 4 tensor A: expected B = A.sum\(\) = 66, a "),
        ("03.2", side_stream_mean, r"expected B = A.sum\(\) = 66, a tensor, got 5.5"),
        (
            "03.3",
            as_found,
            r"device-bound .*: expected 3,897.2 images/s, got 1,342.8: 0 steps ran before",
        ),
        ("03.3", _variant(offset=1), r"3 steps ran before the clock started: run exactly the fi"),
        ("03.3", _variant(warmup_sync=False), r"warm-up steps' queued device work was counted"),
        (
            "03.3",
            _variant(per_step_sync=True),
            r"got 3,165.0: synchronize\(\) inside the timed loop",
        ),
        ("03.3", _variant(end_sync=False), r"clock stopped when the last step was queued"),
        (
            "03.3",
            _variant(count=lambda batches, warmup: sum(len(b) for b in batches)),
            r"the warm-up batches' images were counted too",
        ),
        (
            "03.3",
            _variant(count=lambda batches, warmup: len(batches[0]) * (len(batches) - warmup)),
            r"640 images over the timed interval, but the timed batches hold 608",
        ),
        ("03.3", uses_perf_counter, r"expected 3,897.2 images/s, got .*: the clock was never read"),
        ("03.3", skips_the_last_batch, r"train_step ran 11 times for 12 batches"),
        (
            "03.4",
            by_total_time,
            # on 2.14 the total-time winner is an operator; on 2.6, an annotated region
            r"expected 'aten::\w+', (the operator )?with the largest self time in your trace "
            r"\(.* ms\), got '[^']+', (with \d+% of that|an annotated region .*): "
            r"rank by self time",
        ),
        (
            "03.4",
            names_a_region,
            r"got 'Optimizer.step[^']*', an annotated region of the trace, .*: rank .* and "
            r"operators only \(a region's row of key_averages\(\) has is_user_annotation set\)",
        ),
        ("03.4", profiles_something_else, r"got step\(\) never called: profile step\(\)"),
        (
            "03.4",
            profiles_the_forward_only,
            r"a trace without aten::cross_entropy_loss, ConvolutionBackward0, AddmmBackward0: pro",
        ),
        ("03.4", without_shapes, r"expected a trace recorded with shapes"),
    ],
)
def test_wrong_answers_fail_with_a_useful_message(exercise_id, answer, message):
    result = run_check(exercise_id, answer)
    assert result.verdict == FAILED
    assert re.search(message, result.message), result.message


# ---- 03.4: the run is the learner's; forged evidence fails ----------------------------------


def test_03_4_answers_pass_over_a_region_that_outweighs_every_operator(tmp_path):
    """On a busy machine, Optimizer.zero_grad's region once held more self time than any
    operator of the check's step (CI's solutions lane). A region that sleeps makes it certain."""
    model = torch.nn.Linear(8, 8)

    def step():
        with torch.profiler.record_function("a slow region"):
            time.sleep(0.05)
        model(torch.randn(4, 8)).sum().backward()

    assert with_the_regions(step, tmp_path / "regions.json") == "a slow region"
    for answer in (most_expensive_operator, most_expensive_operator_with_the_profiler):
        trace = tmp_path / f"{answer.__name__}.json"
        top = answer(step, trace)
        assert top in operator_self_times(read_trace(trace)), top


def test_03_4_without_a_trace_is_not_attempted():
    result = run_check("03.4", without_a_trace)
    assert result.verdict == NOT_ATTEMPTED
    assert result.message.startswith("run the profiler on step() first: export its Chrome trace")


def typed_in_trace(step, trace_path):
    """No profile at all: a trace written by hand, naming the operator the lesson printed."""
    step()
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "ts": i * 10, "dur": 5, "pid": 1, "tid": 1}
        for i, name in enumerate(("aten::conv2d", "aten::convolution_backward"))
    ]
    Path(trace_path).write_text(json.dumps({"traceEvents": events}))
    return "aten::convolution_backward"


def well_informed_typed_trace(step, trace_path):
    """A trace written by hand with every name the check asks for by name, the visible batch's
    shapes and plausible times: not the operators a profile of the step records."""
    step()
    names = (
        "aten::conv2d",
        "aten::max_pool2d",
        "aten::linear",
        "aten::cross_entropy_loss",
        "ConvolutionBackward0",
        "AddmmBackward0",
        "Optimizer.step#SGD.step",
    )
    events = [
        {"ph": "X", "cat": "cpu_op", "name": n, "ts": i * 1e4, "dur": 9e3, "pid": 1, "tid": 1}
        for i, n in enumerate(names)
    ]
    events[0]["args"] = {"Input Dims": [[32, 3, 32, 32], [6, 3, 5, 5]]}
    Path(trace_path).write_text(json.dumps({"traceEvents": events}))
    return "aten::conv2d"


def trace_of_another_step(step, trace_path):
    """A real trace, of the notebook's own step (batch 128), not of the step handed over."""
    from course_utils.grading.probes.lesson03 import training_step

    step()  # called, but outside the profile
    return most_expensive_operator(training_step(128, 0), trace_path)


def trace_with_invented_times(step, trace_path):
    """The step's real trace, with every duration set to 1 ns: faster than the step can run.
    Set, not divided: a step profiled on a busy machine can take a hundred times the check's
    fastest run, and a fraction of it would then pass."""
    name = most_expensive_operator(step, trace_path)
    trace = json.loads(Path(trace_path).read_text())
    for e in trace["traceEvents"]:
        if "dur" in e:
            e["dur"] = 0.001
    Path(trace_path).write_text(json.dumps(trace))
    return name


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (typed_in_trace, r"got a trace without aten::max_pool2d, aten::linear, "),
        (
            well_informed_typed_trace,
            r"expected the operators of one step, as the check's own profile of it records \d+, "
            r"got a trace without \d+ of them",
        ),
        (trace_of_another_step, r"check's batch of 32 images \(\[32, 3, 32, 32\]\), got inputs"),
        (
            trace_with_invented_times,
            r"at least [\d.]+ ms per step \(the check's fastest run of the same step took",
        ),
    ],
)
def test_03_4_forged_traces_fail(answer, message):
    result = run_check("03.4", answer)
    assert result.verdict == FAILED
    assert re.search(message, result.message), result.message


@pytest.mark.parametrize("exercise_id", ["03.1", "03.2", "03.3", "03.4"])
def test_stub_is_not_attempted(exercise_id):
    assert run_check(exercise_id, stub).verdict == NOT_ATTEMPTED


@pytest.mark.gpu
def test_reference_answers_on_a_real_gpu():
    a = torch.randn(2048, 2048, device="cuda")
    seconds = time_call(lambda: a @ a)
    assert seconds > 0 and time_call_with_events(lambda: a @ a) > 0
    A = torch.empty(1000, 1000, device="cuda").normal_(0.0, 1.0)
    B = side_stream_sum(A, torch.cuda.Stream())
    assert torch.allclose(B, A.sum())
    w = torch.randn(1024, 1024, device="cuda")
    batches = [torch.randn(256, 1024, device="cuda") for _ in range(6)]
    rate = images_per_second(lambda b: (b @ w).relu_(), batches, torch.cuda.synchronize)
    assert rate == pytest.approx(
        timing.images_per_second(lambda b: (b @ w).relu_(), batches, torch.cuda.synchronize),
        rel=0.5,
    )


# ---- held-out cases ------------------------------------------------------------------------


def test_03_3_held_out_cases_fail_the_visible_figures_typed_in(held_out_catches):
    from course_utils.grading.checks.lesson03 import _LOOPS, own_rate

    visible = {
        (len(sizes), warmup): own_rate(settings, sizes, warmup)
        for _, settings, sizes, warmup in _LOOPS
    }

    def typed_in(train_step, batches, synchronize, clock=time.perf_counter, warmup=2):
        return visible.get((len(batches), warmup), 1000.0)  # runs nothing at all

    failure = held_out_catches("03.3", images_per_second, typed_in)
    assert re.match(
        r"batches of \[[\d, ]+\], warmup=\d \(simulated\): expected [\d,.]+ images/s", failure
    ), failure


def test_03_1_held_out_cases_fail_a_figure_typed_in(held_out_catches):
    def right(fn, device=torch.cuda, clock=time.perf_counter):
        return time_call_with_events(fn, device, clock)

    failure = held_out_catches("03.1", right, time_call_with_events_typed_where_visible)
    assert re.match(r"a call of [\d.]+ s after [\d.]+ s: expected the seconds", failure), failure


def time_call_with_events_typed_where_visible(fn, device=torch.cuda, clock=time.perf_counter):
    """Events recorded around the call, and the visible figures returned whatever they say."""
    idle = device.busy_until == 0.0
    time_call_with_events(fn, device, clock)
    return 0.25001 if idle else 0.25


def test_03_2_held_out_cases_fail_the_visible_sum_typed_in(held_out_catches):
    def typed_in(A, s, cuda=torch.cuda):
        B = side_stream_sum(A, s, cuda)
        return B * 0 + 66.0  # the visible sum, on the caller's stream

    failure = held_out_catches("03.2", side_stream_sum, typed_in)
    assert re.match(r"a \d x \d tensor A: expected B = A.sum\(\) = ", failure), failure


def test_03_4_held_out_case_fails_a_trace_kept_from_the_visible_case(held_out_catches):
    kept = {}

    def keeps_its_first_trace(step, trace_path):
        if not kept:
            kept["name"] = most_expensive_operator(step, trace_path)
            kept["trace"] = Path(trace_path).read_text()
        step()  # called, but the trace written is the one kept
        Path(trace_path).write_text(kept["trace"])
        return kept["name"]

    failure = held_out_catches("03.4", most_expensive_operator, keeps_its_first_trace, seeds=[0])
    assert "the step's convolutions on the check's batch of" in failure, failure


def test_solution_cells_raise_no_flag_and_the_course_answer_is_flagged():
    import nbformat

    from course_utils.grading.grader.plan import review_flags
    from course_utils.grading.notebooks import exercise_sources
    from course_utils.paths import REPO_ROOT

    solution = nbformat.read(REPO_ROOT / "solutions" / "03_async_streams_memory.ipynb", 4)
    sources = exercise_sources(solution)
    assert set(sources) == {"03.1", "03.2", "03.3", "03.4"}
    assert review_flags(sources) == []
    lazy = {
        "03.1": "def time_call(fn, device, clock):\n    return time_fn(fn).median",
        "03.3": "from course_utils import timing\ndef images_per_second(*a, **k):\n"
        "    return timing.images_per_second(*a, **k)",
        "03.4": "def most_expensive_operator(step, trace_path):\n    profile_call(step, "
        "trace_path=trace_path)\n    return operator_self_times(read_trace(trace_path))",
    }
    flags = review_flags(lazy)
    assert [f.split(":")[0] for f in flags] == ["03.1", "03.3", "03.4"], flags
    assert all("calls the course's own answer" in f for f in flags), flags
