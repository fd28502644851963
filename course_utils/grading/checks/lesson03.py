"""Checkers of lesson 03, asynchronous execution, streams and memory.

They run on a CPU. 03.1 and 03.2 verify the answer against course_utils.async_model, a toy model
of an asynchronous device and of CUDA streams: they check the synchronization protocol, not a
real GPU run (the lesson's gated cells run the same functions on a GPU when there is one).
"""

import torch

from course_utils.async_model import SimulatedDevice, StreamRecorder, stream_hazards
from course_utils.grading import call_answer, exercise, expect
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


@exercise("03.3", "read the caching allocator's statistics")
def check_allocator_report(allocator_report):
    mib = 2**20
    stats = {
        "allocated_bytes.all.current": 96 * mib,
        "allocated_bytes.all.peak": 608 * mib,
        "reserved_bytes.all.current": 640 * mib,
        "reserved_bytes.all.peak": 640 * mib,
        "active_bytes.all.current": 96 * mib,
        "num_alloc_retries": 0,
    }
    got = call_answer(allocator_report, dict(stats))
    expect(isinstance(got, dict), "a dict", type(got).__name__)
    want = {"in_tensors": 96 * mib, "cached_free": 544 * mib, "peak_in_tensors": 608 * mib}
    for key, value in want.items():
        expect(
            got.get(key) == value,
            f"{key} = {value // mib} MiB",
            f"{key} = {got.get(key)!r}",
            "allocator_report(stats)",
        )
    return "in tensors, held by the cache but free, and the peak, from memory_stats() keys"


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
