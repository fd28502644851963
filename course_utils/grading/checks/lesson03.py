"""Checkers of lesson 03, asynchronous execution, streams and memory. Each runs on a CPU.

03.1 runs the learner's timing on simulated GPUs (course_utils.async_model), one idle and one
     still busy with earlier work, and reads the device's own log of that run: which clock
     readings or events the figure came from, what was queued, what had finished
     (`timing_problems`). The lesson's gated cell runs the same function on a real GPU.
03.2 runs the learner's side-stream code against a recording stand-in for torch.cuda
     (course_utils.stream_model), then uses the result on the caller's stream, and names every
     missing wait or record_stream.
03.3 runs the learner's throughput measurement on two simulated training loops and reads the
     order of its steps, waits and clock readings; compares with timing.images_per_second.
03.4 runs the learner's profiling of a real training step (the lesson's Net, on this CPU) and
     reads the Chrome trace that run exported: the operator named must have the largest self
     time in it (profiling.operator_self_times).
"""

import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from course_utils import timing
from course_utils.async_model import SimulatedDevice, SimulatedTrainStep, timing_problems
from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out
from course_utils.models import Net
from course_utils.profiling import operator_self_times, read_trace
from course_utils.stream_model import StreamRecorder, stream_hazards

_WORK, _EARLIER = 0.25, 1.0  # seconds of simulated device work: the call, and work queued before
_DEVICES = (("an idle simulated GPU", 0.0), ("a simulated GPU busy with earlier work", _EARLIER))


def _route(log: list[tuple]) -> str:
    if any(e[0] == "event" for e in log):
        return "CUDA events around the call"
    return "synchronize() before starting and before stopping the clock"


@exercise("03.1", "time a device operation correctly")
def check_time_call(time_call):
    for title, earlier in _DEVICES:
        device = SimulatedDevice()
        if earlier:
            device.launch(earlier, "earlier work")  # someone else's work is still queued
        got = call_answer(time_call, device.kernel(_WORK, "the call"), device, device.clock)
        number = isinstance(got, (int, float)) and not isinstance(got, bool)
        expect(number, "a number (seconds)", type(got).__name__, title)
        problems = timing_problems(device.log, got, "the call")
        expect(
            not problems,
            "the seconds of one call on the device",
            f"{got:.3g}: {problems[0]}" if problems else "",
            title,
        )
    return (
        f"{_route(device.log)}, on an idle and a busy simulated GPU: the device's own log "
        "agrees with the figure"
    )


@exercise("03.2", "make the side-stream example race-free")
def check_side_stream_sum(side_stream_sum):
    recorder = StreamRecorder()
    a = recorder.track(torch.arange(12.0).reshape(3, 4))
    s = recorder.Stream()
    got = call_answer(side_stream_sum, a, s, cuda=recorder)
    expect(isinstance(got, torch.Tensor) and float(got) == 66.0, "B = A.sum() = 66.0", repr(got))
    got * 2  # the caller uses B on its own (the default) stream, as callers do
    hazards = stream_hazards(recorder.log, result_read_on=None)
    expect(not hazards, "no race", "; ".join(hazards), "stream protocol")
    return (
        "the side stream waits for A's producer and A is recorded on it; the caller's stream "
        "waits for B and B is recorded on it (checked on a recording stand-in for torch.cuda)"
    )


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


def _measure(answer, settings: dict, sizes: list[int], warmup: int):
    """Run `answer` on a simulated training loop; return its result and what it did, in order."""
    device = SimulatedDevice()
    step = SimulatedTrainStep(device, **settings)
    events = []

    def train_step(batch):
        step(batch)
        events.append(("step",))

    def synchronize():
        device.synchronize()
        events.append(("sync",))

    def clock():
        events.append(("clock", device.clock()))
        return device.clock()

    batches = [torch.zeros(n, 1) for n in sizes]
    return call_answer(answer, train_step, batches, synchronize, clock, warmup=warmup), events


def _diagnosis(events: list[tuple], sizes: list[int], warmup: int, got: float) -> str:
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
    if "sync" not in kinds[timed[-1] : last]:
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
    """The learner's figure on one simulated loop equals timing.images_per_second's, or a
    CheckFailed that says what the learner's run timed wrong (read from the device's log)."""
    want, _ = _measure(timing.images_per_second, settings, sizes, warmup)
    got, events = _measure(images_per_second, settings, sizes, warmup)
    number = isinstance(got, (int, float)) and not isinstance(got, bool)
    expect(number, "a number (images per second)", type(got).__name__)
    if not abs(got - want) <= 1e-9 * want:
        raise CheckFailed(
            f"{where}: expected {want:,.1f} images/s, got {got:,.1f}: "
            f"{_diagnosis(events, sizes, warmup, got)}"
        )


@exercise("03.3", "repair a throughput measurement")
def check_images_per_second(images_per_second):
    for name, settings, sizes, warmup in _LOOPS:
        where = f"{name} loop (simulated), warmup={warmup}"
        _expect_the_reference_rate(images_per_second, settings, sizes, warmup, where)
    return (
        "warm-up untimed, the clock read on an idle device and after the last step finished, "
        "no waits inside the loop, images of the timed batches (simulated device- and host-bound "
        "loops)"
    )


def _training_step():
    """One SGD step of the lesson's Net on a fixed batch of 32 images (on this CPU)."""
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    images, labels = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))

    def step():
        opt.zero_grad()
        F.cross_entropy(net(images), labels).backward()
        opt.step()

    return step


@exercise("03.4", "profile a training step and find its most expensive operator")
def check_most_expensive_operator(most_expensive_operator):
    step = _training_step()
    step()  # a first call pays one-time costs; the profile shows a steady step
    with tempfile.TemporaryDirectory(prefix="course-03.4-") as tmp:
        trace = Path(tmp) / "step_trace.json"
        got = call_answer(most_expensive_operator, step, trace)
        expect(
            trace.exists(),
            f"a Chrome trace written to trace_path ({trace.name})",
            "no file there: export it with profile_call(step, trace_path=trace_path)",
        )
        events = read_trace(trace)
    expect(
        any(e["name"].endswith("Backward0") for e in events),
        "the trace of one call of step() (forward and backward)",
        "a trace without a backward pass: profile step() itself",
    )
    own = operator_self_times(events)
    top, most = own.most_common(1)[0]
    expect(isinstance(got, str), "an operator's name (a str)", type(got).__name__)
    regions = {e["name"] for e in events} - set(own)  # annotations such as Optimizer.step#...
    expect(
        got not in regions,
        f"{top!r}, the operator with the largest self time in your trace ({most / 1e3:.3g} ms)",
        f"{got!r}, an annotated region of the trace, not an operator: rank by self time (an "
        "operator's own work), not total time (which includes everything inside a region)",
    )
    expect(
        got in own,
        f"an operator of your trace, such as {top!r}",
        f"{got!r}, which ran no operator of that name",
    )
    expect(
        own[got] >= 0.9 * most,  # near-ties in a noisy profile count as the same
        f"{top!r}, with the largest self time in your trace ({most / 1e3:.3g} ms)",
        f"{got!r}, with {own[got] / most:.0%} of that: rank by self time (an operator's own "
        "work), not total time (which includes the operators it calls)",
    )
    return (
        "the operator with the largest self time in the trace your profiling exported (a "
        "training step of Net, on the CPU)"
    )


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


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
