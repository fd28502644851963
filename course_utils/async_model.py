"""A toy model of an asynchronous GPU, for demos and checks that must run on a CPU.

It models the two rules lesson 03 is about, nothing more:
- `SimulatedDevice`: a kernel launch returns to the host at once while the work runs later, so
  a host clock read before `synchronize()` measures the launch, not the work.
- `StreamRecorder`: a stand-in for `torch.cuda` (Stream, stream, current_stream,
  default_stream, synchronize) that records what code does with streams, and
  `stream_hazards` names the races in that record (PyTorch's CUDA notes: a side stream must
  wait for the producer, and a tensor used on another stream needs `record_stream`).
Neither runs anything on a GPU; the lesson's gated cells do that.
"""

from __future__ import annotations

import contextlib

import torch


class SimulatedDevice:
    """A virtual host clock and a device queue: `launch` is asynchronous, `synchronize` waits."""

    def __init__(self, launch_overhead: float = 10e-6):
        self.launch_overhead = launch_overhead
        self.now = 0.0  # host time, seconds
        self.busy_until = 0.0  # when the device finishes what is queued

    def clock(self) -> float:
        """The host clock (use it where real code would call time.perf_counter)."""
        return self.now

    def launch(self, seconds: float) -> None:
        """Queue `seconds` of device work; the host only pays the launch overhead."""
        self.now += self.launch_overhead
        self.busy_until = max(self.busy_until, self.now) + seconds

    def kernel(self, seconds: float):
        """A function that launches `seconds` of work each call, like a GPU op."""
        return lambda: self.launch(seconds)

    def synchronize(self) -> None:
        """Block the host until the queue is empty, like torch.cuda.synchronize()."""
        self.now = max(self.now, self.busy_until)


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

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs or {})
        if isinstance(result, torch.Tensor):
            name = getattr(func, "__name__", str(func))
            cls.recorder.log.append(("op", cls.recorder.current.name, name))
        return result

    def record_stream(self, stream) -> None:  # noqa: D102 (mirrors torch.Tensor.record_stream)
        type(self).recorder.log.append(("record_stream", stream.name))


class StreamRecorder:
    """Pass it where code expects `torch.cuda`; `log` lists waits, ops and record_stream calls."""

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

    def track(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` as a subclass whose ops and record_stream calls land in the log."""
        return tensor.as_subclass(self._tensor_cls)


def _waits(entry, waiter: str, producer: str) -> bool:
    kind = entry[0]
    return (
        (kind == "wait" and entry[1:] == (waiter, producer))
        or kind == "sync_all"
        or (kind == "host_wait" and entry[1] == producer)
    )


def stream_hazards(log: list[tuple], side: str = "side", default: str = "default") -> list[str]:
    """The races in a StreamRecorder log, for a tensor made on `default` and read on `side`."""
    side_ops = [i for i, e in enumerate(log) if e[0] == "op" and e[1] == side]
    if not side_ops:
        return ["no operation ran on the side stream; run the work inside `with cuda.stream(s):`"]
    first, last = side_ops[0], side_ops[-1]
    hazards = []
    if not any(_waits(e, side, default) for e in log[:first]):
        hazards.append(
            "the side stream may start before the default stream has produced the input: "
            "call s.wait_stream(cuda.current_stream()) before the side-stream work"
        )
    recorded = any(e == ("record_stream", side) for e in log)
    if not recorded and not any(e[0] in ("sync_all", "host_wait") for e in log[last + 1 :]):
        hazards.append(
            "the input may be freed and its memory reused while the side stream still reads it: "
            "call A.record_stream(s)"
        )
    if not any(_waits(e, default, side) for e in log[last + 1 :]):
        hazards.append(
            "the caller's (default) stream may read the result before the side stream wrote it: "
            "call cuda.current_stream().wait_stream(s) after the side-stream work"
        )
    return hazards
