"""A toy model of an asynchronous GPU, for demos and checks that must run on a CPU.

It models the rules lesson 03 is about, nothing more:
- `SimulatedDevice`: a kernel launch returns to the host at once while the work runs later, so
  a host clock read before `synchronize()` measures the launch, not the work. It has CUDA-style
  events too, and logs every launch, wait and reading; `timing_problems` reads that log and
  says what a measurement got wrong.
  `SimulatedTrainStep` is a training step on it: host work, queued device work, and a one-time
  cost on the first call, so a throughput measurement can be checked deterministically.
- `StreamRecorder`: a stand-in for `torch.cuda` (Stream, stream, current_stream,
  default_stream, synchronize) that records which stream made and read each tensor, and
  `stream_hazards` names the races in that record (PyTorch's CUDA notes: a stream that reads a
  tensor another stream made must wait for it, and needs `record_stream` so that the tensor's
  memory is not reused while it still reads it).
Neither runs anything on a GPU; the lesson's gated cells do that.
"""

from __future__ import annotations

import contextlib

import torch


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

    _count = 0

    def __init__(self, device: SimulatedDevice, enable_timing: bool = False):
        SimulatedEvent._count += 1
        self.id, self.device, self.enable_timing = SimulatedEvent._count, device, enable_timing
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


# Ops that read only a tensor's shape, dtype and device, never its values: no stream ordering
# is needed to run them.
_METADATA_ONLY = {"ones_like", "zeros_like", "empty_like", "full_like", "rand_like", "randn_like"}


class FakeStream:
    def __init__(self, recorder: StreamRecorder, name: str):
        self._recorder, self.name = recorder, name

    def wait_stream(self, other: FakeStream) -> None:
        self._recorder.log.append(("wait", self.name, other.name))

    def synchronize(self) -> None:
        self._recorder.log.append(("host_wait", self.name))

    def __repr__(self) -> str:
        return f"<FakeStream {self.name}>"


class _RecordedTensor(torch.Tensor):
    recorder: StreamRecorder  # set on the per-recorder subclass
    label: str  # set on every tracked tensor and every result of an op on one

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        reads = _reads(name, args, kwargs)
        result = super().__torch_function__(func, types, args, kwargs)
        if isinstance(result, torch.Tensor) or name == "backward":
            cls.recorder._op(name, reads, result)
        return result

    def record_stream(self, stream) -> None:  # noqa: D102 (mirrors torch.Tensor.record_stream)
        type(self).recorder.log.append(("record_stream", self.label, stream.name))


def _reads(name: str, args, kwargs) -> tuple[str, ...]:
    """Labels of the recorded tensors whose values `name(*args, **kwargs)` reads."""
    if name in _METADATA_ONLY:
        return ()
    if name == "backward":
        # The autograd engine orders the graph's own tensors (each backward op runs on its
        # forward op's stream); only the initial gradient is the caller's to order.
        gradient = kwargs.get("gradient", args[1] if len(args) > 1 else None)
        return _labels([gradient])
    return _labels([*args, *kwargs.values()])


def _labels(values) -> tuple[str, ...]:
    found = []
    for v in values:
        if isinstance(v, (list, tuple)):
            found.extend(_labels(v))
        elif isinstance(v, _RecordedTensor) and hasattr(v, "label") and v.label not in found:
            found.append(v.label)
    return tuple(found)


class StreamRecorder:
    """Pass it where code expects `torch.cuda`; `log` lists what each stream made and read.

    Entries: ("made", stream, tensor), ("op", stream, name, tensors read, tensor made),
    ("wait", waiter, producer), ("record_stream", tensor, stream), ("host_wait", stream),
    ("sync_all",). Tensors are named by label: the name given to `track`, else "the <op> result".
    """

    def __init__(self):
        self.log: list[tuple] = []
        self.default = FakeStream(self, "default")
        self.current = self.default
        self._count = 0
        self._tensor_cls = type("RecordedTensor", (_RecordedTensor,), {"recorder": self})

    def Stream(self, device=None, priority: int = 0) -> FakeStream:  # noqa: N802 (torch's name)
        self._count += 1
        return FakeStream(self, "side" if self._count == 1 else f"side{self._count}")

    @contextlib.contextmanager
    def stream(self, s: FakeStream):
        previous, self.current = self.current, s
        try:
            yield s
        finally:
            self.current = previous

    def current_stream(self, device=None) -> FakeStream:
        return self.current

    def default_stream(self, device=None) -> FakeStream:
        return self.default

    def synchronize(self, device=None) -> None:
        self.log.append(("sync_all",))

    def track(self, tensor: torch.Tensor, label: str = "A") -> torch.Tensor:
        """`tensor`, made on the current stream, as a subclass whose use lands in the log."""
        tracked = tensor.as_subclass(self._tensor_cls)
        tracked.label = label
        self.log.append(("made", self.current.name, label))
        return tracked

    def _op(self, name: str, reads: tuple[str, ...], result) -> None:
        made = None
        if isinstance(result, _RecordedTensor):
            if not hasattr(result, "label"):  # a new tensor (in-place results keep theirs)
                result.label = f"the {name} result"
            made = result.label
        self.log.append(("op", self.current.name, name, reads, made))


def _orders(entry, reader: str, producer: str) -> bool:
    """Whether `entry` makes work queued later on `reader` wait for `producer`'s queued work."""
    kind = entry[0]
    return (
        (kind == "wait" and entry[1:] == (reader, producer))
        or kind == "sync_all"
        or (kind == "host_wait" and entry[1] == producer)
    )


def _stream_expr(stream: str) -> str:
    """How the lesson's code names a stream (the code under test runs on the default stream)."""
    if stream == "default":
        return "cuda.current_stream()"
    return "s" if stream == "side" else f"s{stream.removeprefix('side')}"


def _read_hazards(log: list[tuple]) -> list[str]:
    """A stream read a tensor another stream made, without waiting for it or recording it."""
    hazards, made_by, made_at = [], {}, {}
    for i, entry in enumerate(log):
        if entry[0] == "made":
            made_by[entry[2]], made_at[entry[2]] = entry[1], i
        if entry[0] != "op":
            continue
        _, stream, _, reads, made = entry
        for label in reads:
            producer = made_by.get(label, stream)
            if producer == stream:
                continue
            if not any(_orders(e, stream, producer) for e in log[made_at[label] : i]):
                hazards.append(
                    f"the {stream} stream may read {label} before the {producer} stream has "
                    f"produced it: call {_stream_expr(stream)}.wait_stream("
                    f"{_stream_expr(producer)}) before the {stream}-stream work"
                )
            if not _memory_kept(log, i, label, stream):
                hazards.append(
                    f"{label} may be freed and its memory reused while the {stream} stream still "
                    f"reads it: {_record_call(label, stream)}"
                )
        if made is not None:
            made_by[made], made_at[made] = stream, i
    return list(dict.fromkeys(hazards))  # each hazard once, in order


def _record_call(label: str, stream: str) -> str:
    call = f"record_stream({_stream_expr(stream)})"
    return f"call {label}.{call}" if label.isidentifier() else f"call .{call} on {label}"


def _memory_kept(log: list[tuple], read_at: int, label: str, stream: str) -> bool:
    """record_stream(label, stream) anywhere, or the host waits for `stream` after the read."""
    return ("record_stream", label, stream) in log or any(
        e[0] == "sync_all" or e == ("host_wait", stream) for e in log[read_at + 1 :]
    )


def stream_hazards(
    log: list[tuple], side: str = "side", result_read_on: str | None = "default"
) -> list[str]:
    """The races in a StreamRecorder log of code that works on the `side` stream.

    Every tensor read on a stream other than the one that made it needs a wait for that stream
    before the read and `record_stream` on the reading stream (or a host wait after the read).
    `result_read_on`: the stream on which the caller then uses the last tensor the side stream
    made (None when the caller uses nothing): that use is such a read, so it needs both.
    """
    side_ops = [e for e in log if e[0] == "op" and e[1] == side]
    if not side_ops:
        return ["no operation ran on the side stream; run the work inside `with cuda.stream(s):`"]
    made = [e[4] for e in side_ops if e[4] is not None]
    if result_read_on is not None and made:  # the caller's use, after everything logged
        log = [*log, ("op", result_read_on, "the caller's use", (made[-1],), None)]
    return _read_hazards(log)
