"""Checkers of lesson 03, asynchronous execution, streams and memory. Each runs on a CPU.

The probes (probes/lesson03.py) run the learner's code in their process and return plain data;
the judge recomputes what it can.
03.1 (code) runs the learner's timing on simulated GPUs, one idle and one still busy with earlier
     work, for durations the judge chose. The simulated device is deterministic: the judge runs
     the two right answers (synchronize, events) on a device of its own and requires the
     learner's figure to be one of theirs; the device's log of the learner's run
     (`timing_problems`) must agree, and says what went wrong.
03.2 (code) runs the learner's side-stream code against a recording stand-in for torch.cuda on a
     tensor the judge drew; the judge checks the sum against its own and names every missing
     wait or record_stream in the recorder's log.
03.3 (code) runs the learner's throughput measurement on two simulated training loops; the judge
     runs the course's measurement on the same loops itself and compares, and reads the order of
     the learner's steps, waits and clock readings to say what was timed wrong.
03.4 (run) hands the learner's function a real training step of the lesson's Net on a batch the
     judge drew; the learner's code profiles it and exports the trace, which the probe reads.
     The judge parses the trace itself: the step's operators (those of its own profile of the
     same step), on the judge's batch, taking no less time than the judge measures for the same
     step; then the operator named must have the largest self time in it
     (profiling.operator_self_times). No trace: not attempted.
"""

import math

import torch

from course_utils.async_gpu.async_model import timing_problems
from course_utils.async_gpu.stream_model import stream_hazards
from course_utils.grading import (
    CheckFailed,
    NotAttempted,
    exercise,
    expect,
    held_out,
    run_probe,
)
from course_utils.grading.checks.lesson03_references import (
    own_call_figures,
    own_operators,
    own_rate,
    own_step_seconds,
)
from course_utils.grading.checks.traces import expect_operators, trace_events
from course_utils.grading.probes.lesson03 import (
    run_images_per_second,
    run_profiling,
    run_side_stream_sum,
    run_time_call,
)
from course_utils.profiling import operator_self_times

SAME_SIZE = 10.0  # the trace's time per step at most this much below the judge's own timing


def _number(x) -> bool:
    return type(x) in (int, float) and math.isfinite(x)


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(b), 1e-9)


# ---- 03.1 ---------------------------------------------------------------------------------

_WORK, _EARLIER = 0.25, 1.0  # seconds of simulated device work: the call, and work queued before
_DEVICES = (("an idle simulated GPU", 0.0), ("a simulated GPU busy with earlier work", _EARLIER))


def _route(log: list) -> str:
    if any(e[0] == "event" for e in log):
        return "CUDA events around the call"
    return "synchronize() before starting and before stopping the clock"


def _expect_the_call_timed(time_call, work: float, earlier: float, where: str) -> list:
    got = run_probe(run_time_call, time_call, work=work, earlier=earlier)
    value, log = got["value"], got["log"]
    expect(_number(value), "a number (seconds)", type(value).__name__, where)
    problems = timing_problems(log, value, "the call")
    figures = own_call_figures(work, earlier)
    if not any(_same(value, f) for f in figures) or problems:
        why = problems[0] if problems else "no figure a correct timing gives"
        right = " or ".join(f"{f:.6g}" for f in sorted(set(figures)))
        raise CheckFailed(
            f"{where}: expected the seconds of one call on the device, {right}, got {value:.6g}: "
            f"{why}"
        )
    return log


@exercise("03.1", "time a device operation correctly", reference=(r"\btime_fn\s*\(", r"naive_vs"))
def check_time_call(time_call):
    for where, earlier in _DEVICES:
        log = _expect_the_call_timed(time_call, _WORK, earlier, where)
    return (
        f"{_route(log)}, on an idle and a busy simulated GPU: your figure is the call's time, and "
        "the device's log of your run agrees"
    )


# ---- 03.2 ---------------------------------------------------------------------------------


def _expect_a_safe_sum(side_stream_sum, values: torch.Tensor, where: str) -> None:
    got = run_probe(run_side_stream_sum, side_stream_sum, values=values)
    value, want = got["value"], values.sum()
    right = type(value) is torch.Tensor and value.shape == () and torch.allclose(value, want)
    shown = value.tolist() if type(value) is torch.Tensor else repr(value)[:80]
    expect(right, f"B = A.sum() = {want.item():.6g}, a tensor", shown, where)
    hazards = stream_hazards(got["log"], result_read_on=None)
    expect(not hazards, "no race", "; ".join(hazards), "stream protocol")


@exercise("03.2", "make the side-stream example race-free")
def check_side_stream_sum(side_stream_sum):
    _expect_a_safe_sum(side_stream_sum, torch.arange(12.0).reshape(3, 4), "a 3 x 4 tensor A")
    return (
        "the side stream waits for A's producer and A is recorded on it; the caller's stream "
        "waits for B and B is recorded on it (checked on a recording stand-in for torch.cuda)"
    )


# ---- 03.3 ---------------------------------------------------------------------------------

# Two loops: one waits on the device (the usual GPU case), one on the host (Python, data).
_LOOPS = (  # name, SimulatedTrainStep settings, batch sizes, warmup
    (
        "device-bound",
        {"host_seconds": 4e-3, "device_seconds_per_image": 2.5e-4},
        [64] * 11 + [32],
        2,
    ),
    ("host-bound", {"host_seconds": 20e-3, "device_seconds_per_image": 1e-4}, [64] * 6, 1),
)


def _diagnosis(events: list, sizes: list[int], warmup: int, got: float) -> str:
    """What the answer did wrong, read from the order of its steps, waits and clock readings."""
    kinds = [e[0] for e in events]
    steps = kinds.count("step")
    if "clock" not in kinds:
        return "the clock was never read: call clock() (the check passes a simulated one)"
    if steps != len(sizes):
        return (
            f"train_step ran {steps} times for {len(sizes)} batches: run each batch once, "
            f"the first {warmup} untimed"
        )
    first, last = kinds.index("clock"), len(kinds) - 1 - kinds[::-1].index("clock")
    before = kinds[:first].count("step")
    timed = [i for i, k in enumerate(kinds) if k == "step"][before:]
    if before != warmup:
        return (
            f"{before} steps ran before the clock started: run exactly the first {warmup} "
            "(warm-up: CUDA context, cuDNN autotuning, allocator growth) untimed"
        )
    if warmup and "sync" not in kinds[:first]:
        return (
            "the warm-up steps' queued device work was counted: call synchronize() after "
            "the warm-up, before starting the clock"
        )
    if timed and "sync" in kinds[timed[0] : timed[-1]]:
        return (
            "synchronize() inside the timed loop made the loop slower: the host waited "
            "every step, so its work no longer overlapped the device's; synchronize only "
            "before starting and before stopping the clock"
        )
    if not timed or "sync" not in kinds[timed[-1] : last]:
        return (
            "the clock stopped when the last step was queued, not when it was done: call "
            "synchronize() before reading the clock at the end"
        )
    images = got * (events[last][1] - events[first][1])
    if abs(images - sum(sizes)) < 0.5:
        return "the warm-up batches' images were counted too: count only the timed batches"
    return (
        f"{images:.0f} images over the timed interval, but the timed batches hold "
        f"{sum(sizes[warmup:])}: add len(batch) of each timed batch (the last one is smaller)"
    )


def _expect_the_reference_rate(images_per_second, settings, sizes, warmup, where: str) -> None:
    """The learner's figure on one simulated loop equals the judge's own run of the course's
    measurement, or a CheckFailed that says what the learner's run timed wrong."""
    want = own_rate(settings, sizes, warmup)
    report = run_probe(
        run_images_per_second, images_per_second, settings=settings, sizes=sizes, warmup=warmup
    )
    got = report["value"]
    expect(_number(got), "a number (images per second)", type(got).__name__, where)
    if not abs(got - want) <= 1e-9 * want:
        raise CheckFailed(
            f"{where}: expected {want:,.1f} images/s, got {got:,.1f}: "
            f"{_diagnosis(report['events'], sizes, warmup, got)}"
        )


@exercise(
    "03.3",
    "repair a throughput measurement",
    reference=(r"timing\.images_per_second", r"import[^\n]*\bimages_per_second\b"),
)
def check_images_per_second(images_per_second):
    for name, settings, sizes, warmup in _LOOPS:
        where = f"{name} loop (simulated), warmup={warmup}"
        _expect_the_reference_rate(images_per_second, settings, sizes, warmup, where)
    return (
        "warm-up untimed, the clock read on an idle device and after the last step finished, "
        "no waits inside the loop, images of the timed batches (simulated device- and host-bound "
        "loops)"
    )


# ---- 03.4 ---------------------------------------------------------------------------------

# What a trace of one step of Net holds, whatever else it holds: forward, loss, backward, update.
_STEP_OPS = ("aten::conv2d", "aten::max_pool2d", "aten::linear", "aten::cross_entropy_loss")
_BACKWARD = ("ConvolutionBackward0", "AddmmBackward0")


def _expect_a_trace_of_the_step(events: list[dict], batch: int, calls: int) -> None:
    names = {e["name"] for e in events}
    expect(calls >= 1, "the trace of calls of step()", "step() never called: profile step()")
    missing = [n for n in (*_STEP_OPS, *_BACKWARD) if n not in names]
    expect(
        not missing,
        "the trace of one call of step() (forward, backward and the optimizer's update)",
        f"a trace without {', '.join(missing)}: profile step() itself",
    )
    expect(
        any(n.startswith("Optimizer.step") for n in names),
        "the trace of one call of step(), the optimizer's step included",
        "a trace without Optimizer.step: profile all of step()",
    )
    dims = [e.get("args", {}).get("Input Dims") for e in events if e["name"] == "aten::conv2d"]
    expect(
        any(dims),
        "a trace recorded with shapes (profile_call records them)",
        "no shapes: profile with profile_call, or torch.profiler.profile(record_shapes=True)",
    )
    firsts = [d[0] for d in dims if type(d) is list and d and type(d[0]) is list]
    expect(
        [batch, 3, 32, 32] in firsts,
        f"the step's convolutions on the check's batch of {batch} images ([{batch}, 3, 32, 32])",
        f"inputs of shapes {firsts[:2]}: export the trace of the step you were given",
    )


def _expect_the_most_expensive(name, own: dict, events: list[dict]) -> str:
    expect(type(name) is str, "an operator's name (a str)", type(name).__name__)
    top, most = max(own.items(), key=lambda kv: kv[1])
    regions = {e["name"] for e in events} - set(own)  # annotations such as Optimizer.step#...
    expect(
        name not in regions,
        f"{top!r}, the operator with the largest self time in your trace ({most / 1e3:.3g} ms)",
        f"{name!r}, an annotated region of the trace, not an operator: rank by self time (an "
        "operator's own work), not total time (which includes everything inside a region), "
        "and operators only (a region's row of key_averages() has is_user_annotation set)",
    )
    expect(
        name in own,
        f"an operator of your trace, such as {top!r}",
        f"{name!r}, which ran no operator of that name",
    )
    expect(
        own[name] >= 0.9 * most,  # near-ties in a noisy profile count as the same
        f"{top!r}, with the largest self time in your trace ({most / 1e3:.3g} ms)",
        f"{name!r}, with {own[name] / most:.0%} of that: rank by self time (an operator's own "
        "work), not total time (which includes the operators it calls)",
    )
    return top


def _expect_a_profiled_step(answer, batch: int, seed: int) -> None:
    report = run_probe(run_profiling, answer, batch=batch, seed=seed)
    if report["trace"] is None:
        raise NotAttempted(
            "run the profiler on step() first: export its Chrome trace to trace_path "
            "(profile_call(step, trace_path=trace_path))"
        )
    expect(type(report["trace"]) is str, "the trace's text", type(report["trace"]).__name__)
    events = trace_events(report["trace"])
    calls = report["calls"] if type(report["calls"]) is int else 0
    _expect_a_trace_of_the_step(events, batch, calls)
    mine = own_operators(batch, seed)
    expect_operators(events, mine, "one step")
    own = dict(operator_self_times(events))
    per_call = sum(own.values()) / 1e6 / calls
    fastest = own_step_seconds(batch, seed)
    expect(
        per_call >= fastest / SAME_SIZE,  # a profile under load takes longer, never much less
        f"operators' self times adding up to at least {fastest / SAME_SIZE * 1e3:.2g} ms per "
        f"step (the check's fastest run of the same step took {fastest * 1e3:.3g} ms)",
        f"{per_call * 1e3:.3g} ms: export the trace the profiler recorded, unchanged",
    )
    _expect_the_most_expensive(report["name"], own, events)


@exercise(
    "03.4",
    "profile a training step and find its most expensive operator",
    reference=(r"operator_self_times\s*\(",),
)
def check_most_expensive_operator(most_expensive_operator):
    _expect_a_profiled_step(most_expensive_operator, batch=32, seed=0)
    return (
        "the operator with the largest self time in the trace your profiling exported (a "
        "training step of Net on the check's batch, on the CPU)"
    )


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("03.1", cases=2)
def held_out_time_call(rng, time_call):
    """Other durations: a figure typed in (0.25, 0.25001) fails them."""
    work, earlier = round(rng.uniform(0.01, 0.5), 4), round(rng.uniform(0.0, 2.0), 3)
    _expect_the_call_timed(time_call, work, earlier, f"a call of {work} s after {earlier} s")


@held_out("03.2", cases=2)
def held_out_side_stream_sum(rng, side_stream_sum):
    """Another tensor A: the visible sum typed in fails it."""
    shape = (rng.randint(2, 6), rng.randint(2, 6))
    values = torch.randn(shape, generator=torch.Generator().manual_seed(rng.randrange(2**31)))
    _expect_a_safe_sum(side_stream_sum, values, f"a {shape[0]} x {shape[1]} tensor A")


@held_out("03.3", cases=3)
def held_out_images_per_second(rng, images_per_second):
    """Other loops (speeds, batch sizes, warm-ups): the two visible figures typed in, or images
    counted as if every timed batch but the last held as many as the first, fail them."""
    settings = {
        "host_seconds": rng.choice([1e-3, 5e-3, 2e-2]),
        "device_seconds_per_image": rng.choice([5e-5, 1e-4, 3e-4]),
    }
    sizes = [rng.choice([16, 32, 48, 64, 100]) for _ in range(rng.randint(4, 10))]
    warmup = rng.randint(0, 3)
    where = f"batches of {sizes}, warmup={warmup} (simulated)"
    _expect_the_reference_rate(images_per_second, settings, sizes, warmup, where)


@held_out("03.4", cases=1)
def held_out_most_expensive_operator(rng, most_expensive_operator):
    """Another batch: a trace kept from the visible case (or typed in) fails it."""
    _expect_a_profiled_step(
        most_expensive_operator, rng.choice([8, 16, 24, 40, 48]), rng.randint(1, 99)
    )
