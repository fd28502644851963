"""Checkers of lesson 03, asynchronous execution, streams and memory.

They run on a CPU. 03.1, 03.2 and 03.3 verify the answer against course_utils.async_model, a toy
model of an asynchronous device and of CUDA streams: they check the synchronization protocol, not
a real GPU run (the lesson's gated cells run the same functions on a GPU when there is one). 03.3
compares with course_utils.timing.images_per_second on the same simulated loops.
"""

import torch

from course_utils import timing
from course_utils.async_model import (
    SimulatedDevice,
    SimulatedTrainStep,
    StreamRecorder,
    stream_hazards,
)
from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out
from course_utils.profiling import profile_call

_WORK, _EARLIER = 0.25, 1.0  # seconds of simulated device work: the call, and work queued before


@exercise("03.1", "time a GPU call correctly")
def check_time_call(time_call):
    device = SimulatedDevice()
    device.launch(_EARLIER)  # someone else's work is still in the queue
    got = call_answer(time_call, device.kernel(_WORK), device.synchronize, device.clock)
    expect(isinstance(got, float), "a float (seconds)", type(got).__name__)
    want = _WORK + device.launch_overhead
    if got < _WORK / 2:
        expect(
            False,
            f"about {want:.3g} s (the call's work)",
            f"{got:.3g} s: the clock stopped at the launch; synchronize before reading it again",
        )
    expect(
        abs(got - want) < 1e-6,
        f"about {want:.3g} s (the call's work only)",
        f"{got:.3g} s: earlier queued work was counted; synchronize before starting the clock",
    )
    return "synchronized before starting and before stopping the clock (on a simulated device)"


@exercise("03.2", "make the side-stream example race-free")
def check_side_stream_sum(side_stream_sum):
    recorder = StreamRecorder()
    a = recorder.track(torch.arange(12.0).reshape(3, 4))
    s = recorder.Stream()
    got = call_answer(side_stream_sum, a, s, cuda=recorder)
    expect(isinstance(got, torch.Tensor) and float(got) == 66.0, "B = A.sum() = 66.0", repr(got))
    hazards = stream_hazards(recorder.log)
    expect(not hazards, "no race", "; ".join(hazards), "stream protocol")
    return (
        "side stream waits for the producer, A is recorded on it, the caller waits for B "
        "(checked on a recording stand-in for torch.cuda)"
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


@exercise("03.3", "repair a throughput measurement")
def check_images_per_second(images_per_second):
    for name, settings, sizes, warmup in _LOOPS:
        want, _ = _measure(timing.images_per_second, settings, sizes, warmup)
        got, events = _measure(images_per_second, settings, sizes, warmup)
        number = isinstance(got, (int, float)) and not isinstance(got, bool)
        expect(number, "a number (images per second)", type(got).__name__)
        if not abs(got - want) <= 1e-9 * want:
            raise CheckFailed(
                f"{name} loop (simulated), warmup={warmup}: expected {want:,.1f} images/s, got "
                f"{got:,.1f}: {_diagnosis(events, sizes, warmup, got)}"
            )
    return (
        "warm-up untimed, the clock read on an idle device and after the last step finished, "
        "no waits inside the loop, images of the timed batches (device- and host-bound loops)"
    )


@exercise("03.4", "find the most expensive operator in a profile")
def check_top_operator(top_operator):
    # The product's inner dimension is large and its result small, so the matrix product
    # dominates by far on any CPU or load. (A square 512 x 512 product did not: relu's fresh
    # 1 MiB output page-faults in, and clamp_min won in about half the runs on 2 cores.)
    a, b = torch.randn(256, 4096), torch.randn(4096, 256)

    def work():
        for _ in range(3):
            torch.relu(a @ b)

    prof = profile_call(work)
    events = prof.key_averages()
    want = max(events, key=lambda e: e.self_cpu_time_total).key
    got = call_answer(top_operator, prof)
    expect(got == want, repr(want), repr(got), "operator with the largest self CPU time")
    return "the operator with the largest self CPU time, from key_averages()"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("03.1", cases=3)
def held_out_time_call(rng, time_call):
    """Other amounts of work, timed behind other queues: the visible 0.25 s typed in fails them."""
    work, earlier = round(rng.uniform(0.01, 2.0), 3), round(rng.uniform(0.1, 3.0), 3)
    device = SimulatedDevice()
    device.launch(earlier)
    got = call_answer(time_call, device.kernel(work), device.synchronize, device.clock)
    want = work + device.launch_overhead
    right = isinstance(got, float) and abs(got - want) < 1e-6
    expect(right, f"about {want:.4g} s", repr(got), f"a call of {work} s behind {earlier} s queued")
