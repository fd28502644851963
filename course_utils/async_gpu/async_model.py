"""A toy model of an asynchronous GPU, for demos and checks that must run on a CPU (lesson 03).

It models the rules lesson 03 is about, nothing more: a kernel launch returns to the host at
once while the work runs later, so a host clock read before `synchronize()` measures the launch,
not the work. `SimulatedDevice` has CUDA-style events too, and logs every launch, wait and
reading; `timing_problems` reads a measurement against that log and says what it got wrong, and
`log_lines` prints the log. `SimulatedTrainStep` is a training step on it: host work, queued
device work, and a one-time cost on the first call, so a throughput measurement can be checked
deterministically. Streams have a model of their own: `stream_model`. Nothing here runs on a
GPU; the lesson's gated cells do that.
"""

from __future__ import annotations


class SimulatedDevice:
    """A virtual host clock and a device queue: `launch` is asynchronous, `synchronize` waits.

    `log` records what happened, in order, so a check can read how a measurement was taken:
    ("launch", name, host time, device start, device end), ("sync", host time after it),
    ("clock", host time read, device busy until), ("event", event id, device time),
    ("event_wait", event id, host time after it). Times are seconds.
    """

    def __init__(self, launch_overhead: float = 10e-6):
        self.launch_overhead = launch_overhead
        self.now = 0.0  # host time, seconds
        self.busy_until = 0.0  # when the device finishes what is queued
        self.log: list[tuple] = []
        self.events_made = 0

    def clock(self) -> float:
        """The host clock (use it where real code would call time.perf_counter)."""
        self.log.append(("clock", self.now, self.busy_until))
        return self.now

    def host(self, seconds: float) -> None:
        """The host works for `seconds` (Python, data preparation): only its clock moves."""
        self.now += seconds

    def launch(self, seconds: float, name: str = "kernel") -> None:
        """Queue `seconds` of device work; the host only pays the launch overhead."""
        self.now += self.launch_overhead
        start = max(self.busy_until, self.now)
        self.busy_until = start + seconds
        self.log.append(("launch", name, self.now, start, self.busy_until))

    def kernel(self, seconds: float, name: str = "kernel"):
        """A function that launches `seconds` of work each call, like a GPU op."""
        return lambda: self.launch(seconds, name)

    def synchronize(self) -> None:
        """Block the host until the queue is empty, like torch.cuda.synchronize()."""
        self.now = max(self.now, self.busy_until)
        self.log.append(("sync", self.now))

    def Event(self, enable_timing: bool = False) -> SimulatedEvent:  # noqa: N802 (torch's name)
        """A CUDA event on this device (torch.cuda.Event's methods)."""
        return SimulatedEvent(self, enable_timing)


class SimulatedEvent:
    """torch.cuda.Event on a SimulatedDevice: a timestamp the device writes when its queue
    reaches it. `elapsed_time` is in milliseconds, as CUDA's, and like CUDA it raises while
    the end event has not happened yet (the host must wait for it first)."""

    def __init__(self, device: SimulatedDevice, enable_timing: bool = False):
        device.events_made += 1  # events are numbered per device, 1, 2, ...
        self.id, self.device, self.enable_timing = device.events_made, device, enable_timing
        self.time: float | None = None  # device time at which the queue reaches the event

    def record(self, stream=None) -> None:
        self.time = max(self.device.busy_until, self.device.now)
        self.device.log.append(("event", self.id, self.time))

    def query(self) -> bool:
        return self.time is not None and self.device.now >= self.time

    def synchronize(self) -> None:
        """Block the host until the device has reached this event."""
        if self.time is None:
            raise RuntimeError("synchronize() on an event that was never recorded: record() it")
        self.device.now = max(self.device.now, self.time)
        self.device.log.append(("event_wait", self.id, self.device.now))

    def elapsed_time(self, end: SimulatedEvent) -> float:
        """Milliseconds between this event and `end`, once both have happened."""
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with enable_timing=True")
        if self.time is None or end.time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time")
        if not (self.query() and end.query()):
            raise RuntimeError(
                "CUDA error: device not ready (the end event has not happened yet: call "
                "end.synchronize() before elapsed_time)"
            )
        return (end.time - self.time) * 1e3


def log_lines(log: list[tuple]) -> list[str]:
    """A SimulatedDevice log, one sentence per entry (times in seconds, to the microsecond)."""
    say = {
        "launch": "launch {1!r}: queued at {2:.6f}, ran on the device {3:.6f} to {4:.6f}",
        "clock": "clock() read {1:.6f}; the device busy until {2:.6f}",
        "sync": "synchronize(): the host waited until {1:.6f}",
        "event": "event {1} recorded; the device reaches it at {2:.6f}",
        "event_wait": "event {1}.synchronize(): the host waited until {2:.6f}",
    }
    return [say[entry[0]].format(*entry) for entry in log]


def timing_problems(log: list[tuple], seconds, name: str = "kernel") -> list[str]:
    """What is wrong with `seconds` as the time of one `name` call, read from a device's log.

    A right answer is the difference of two host clock readings with one `name` launched
    between them, the device idle at the first reading and done with the call at the second;
    or the elapsed time of two events recorded around one call, in seconds. Empty: correct.
    """
    if not any(e[0] == "launch" and e[1] == name for e in log):
        return [f"{name} was never launched: call it once between the two readings"]
    readings = [(i, e[1], e[2]) for i, e in enumerate(log) if e[0] == "clock"]
    for (i1, t1, busy), (i2, t2, _) in zip(readings, readings[1:]):
        if _same(t2 - t1, seconds):
            return _clock_problems(log[i1:i2], t1, t2, busy, name)
    marks = [(i, e[2]) for i, e in enumerate(log) if e[0] == "event"]
    for (i1, d1), (i2, d2) in zip(marks, marks[1:]):
        if _same(d2 - d1, seconds):
            return _between(log[i1:i2], name)
        if _same((d2 - d1) * 1e3, seconds):
            return ["elapsed_time() returns milliseconds: divide it by 1000 for seconds"]
    return [
        f"{seconds!r} is no interval this device recorded: return the difference of two clock() "
        "readings, or the events' elapsed_time() / 1000"
    ]


def _same(a: float, b) -> bool:
    return isinstance(b, (int, float)) and abs(a - b) <= 1e-9 * max(abs(a), 1e-9)


def _between(entries: list[tuple], name: str) -> list[str]:
    calls = [e for e in entries if e[0] == "launch" and e[1] == name]
    if len(calls) != 1:
        return [f"{len(calls)} calls of {name} between the two readings: time exactly one"]
    return []


def _clock_problems(entries, t1: float, t2: float, busy: float, name: str) -> list[str]:
    problems = _between(entries, name)
    if problems:
        return problems
    end = next(e[4] for e in entries if e[0] == "launch" and e[1] == name)
    if end > t2:
        return [
            f"the clock stopped {end - t2:.3g} s before {name}'s device work ended: synchronize "
            "before reading the clock again"
        ]
    if busy > t1:
        return [
            f"the device was still busy with earlier work when the clock started ({busy - t1:.3g}"
            " s of it were counted): synchronize before starting the clock"
        ]
    return []


class SimulatedTrainStep:
    """One training step on a SimulatedDevice: `host_seconds` on the host, then device work.

    The device work is `device_seconds_per_image` per image of the batch (anything with a len).
    The first call also pays `first_call_seconds` on the host, as a real first step does: CUDA
    context and library handles, cuDNN autotuning (benchmark=True), the caching allocator growing
    its pool. `calls` counts the steps taken.
    """

    def __init__(
        self,
        device: SimulatedDevice,
        host_seconds: float = 4e-3,
        device_seconds_per_image: float = 0.25e-3,
        first_call_seconds: float = 0.5,
    ):
        self.device = device
        self.host_seconds = host_seconds
        self.device_seconds_per_image = device_seconds_per_image
        self.first_call_seconds = first_call_seconds
        self.calls = 0

    def __call__(self, batch) -> None:
        if self.calls == 0:
            self.device.host(self.first_call_seconds)
        self.calls += 1
        self.device.host(self.host_seconds)
        self.device.launch(len(batch) * self.device_seconds_per_image)
