"""A recording stand-in for torch.cuda's streams, for demos and checks on a CPU (lesson 03).

`StreamRecorder` stands in for `torch.cuda` (Stream, stream, current_stream, default_stream,
synchronize) and records which stream made and read each tensor; `stream_hazards` names the
races in that record (PyTorch's CUDA notes: a stream that reads a tensor another stream made
must wait for it, and needs `record_stream` so that the tensor's memory is not reused while it
still reads it). Nothing here runs on a GPU; the lesson's gated cells do that.
"""

from __future__ import annotations

import contextlib

import torch

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
