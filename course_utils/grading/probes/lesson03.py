"""Lesson 03's probes: what its checks hand the learner's code, in the learner's process.

The probes return plain data. 03.1 and 03.3 hand the learner's function a simulated GPU
(`async_model.SimulatedDevice`) and report what it returned and the device's log (03.3: the
order of its steps, waits and clock readings); the simulated device is deterministic, so the
judge reruns the right answers on a device of its own (checks/lesson03.py) and compares. 03.2
hands it a recording stand-in for torch.cuda (`stream_model.StreamRecorder`) holding a tensor
the judge drew, and reports the sum and the recorder's log. 03.4 hands it a real training step
of the lesson's Net, on a batch the judge drew, and reports the Chrome trace the learner's code
exported (its text), read in the learner's folder; the judge parses it and times the same step
itself.
"""

import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from course_utils.async_gpu.async_model import SimulatedDevice, SimulatedTrainStep
from course_utils.async_gpu.stream_model import StreamRecorder
from course_utils.grading import probe
from course_utils.models import Net
from course_utils.profiling import quiet_profiler_warnings

# ---- 03.1 ---------------------------------------------------------------------------------


def _device(work: float, earlier: float) -> tuple[SimulatedDevice, object]:
    device = SimulatedDevice()
    if earlier:
        device.launch(earlier, "earlier work")  # someone else's work, still queued
    return device, device.kernel(work, "the call")


@probe("03.1")
def run_time_call(time_call, work: float, earlier: float):
    device, call = _device(work, earlier)
    got = time_call(call, device, device.clock)
    return {"value": got, "log": device.log}


# ---- 03.2 ---------------------------------------------------------------------------------


@probe("03.2")
def run_side_stream_sum(side_stream_sum, values):
    recorder = StreamRecorder()
    got = side_stream_sum(recorder.track(values.clone()), recorder.Stream(), cuda=recorder)
    if isinstance(got, torch.Tensor):
        got * 2  # the caller uses B on its own (the default) stream, as callers do
    log = list(recorder.log)
    if isinstance(got, torch.Tensor):  # the recorder's tensor class stays here
        got = got.as_subclass(torch.Tensor).detach().clone()
    return {"value": got, "log": log}


# ---- 03.3 ---------------------------------------------------------------------------------


def measure_rate(answer, settings: dict, sizes: list[int], warmup: int):
    """Run `answer` on a simulated training loop; its result and what it did, in order."""
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
    return answer(train_step, batches, synchronize, clock, warmup=warmup), events


@probe("03.3")
def run_images_per_second(images_per_second, settings: dict, sizes: list, warmup: int):
    got, events = measure_rate(images_per_second, settings, sizes, warmup)
    return {"value": got, "events": events}


# ---- 03.4 ---------------------------------------------------------------------------------


def training_step(batch: int, seed: int):
    """One SGD step of the lesson's Net on a fixed batch of `batch` images (on this CPU)."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    images = torch.randn(batch, 3, 32, 32, generator=generator)
    labels = torch.randint(0, 10, (batch,), generator=generator)

    def step():
        opt.zero_grad()
        F.cross_entropy(net(images), labels).backward()
        opt.step()

    return step


@probe("03.4")
def run_profiling(most_expensive_operator, batch: int, seed: int):
    """The learner's profiling of a real step; the trace it exported, as text."""
    step, calls = training_step(batch, seed), []
    for _ in range(3):  # the first calls pay one-time costs; the profile shows a steady step
        step()

    def counted():
        calls.append(1)
        step()

    with tempfile.TemporaryDirectory(prefix="course-03.4-") as tmp:
        path = Path(tmp) / "step_trace.json"
        with quiet_profiler_warnings():  # a PyTorch release's note, not the learner's output
            name = most_expensive_operator(counted, path)
        trace = path.read_text(errors="replace") if path.is_file() else None
    return {"name": name, "trace": trace, "calls": len(calls)}
