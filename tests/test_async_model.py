"""The toy asynchronous device and the stream recorder behave like the rules they model."""

import torch

from course_utils.async_model import SimulatedDevice, StreamRecorder, stream_hazards


def test_launch_returns_before_the_work_and_synchronize_waits():
    dev = SimulatedDevice(launch_overhead=1e-5)
    dev.launch(0.5)
    assert dev.clock() == 1e-5  # the host only paid the launch
    dev.synchronize()
    assert dev.clock() == 0.5 + 1e-5
    dev.synchronize()  # an idle device: no wait
    assert dev.clock() == 0.5 + 1e-5


def test_queued_work_runs_back_to_back():
    dev = SimulatedDevice(launch_overhead=0.0)
    k = dev.kernel(0.1)
    k(), k(), k()
    dev.synchronize()
    assert abs(dev.clock() - 0.3) < 1e-12


def test_recorder_logs_ops_per_stream_and_record_stream():
    cuda = StreamRecorder()
    a = cuda.track(torch.ones(3))
    s = cuda.Stream()
    (a * 2).sum()  # on the default stream
    with cuda.stream(s):
        assert cuda.current_stream() is s
        torch.sum(a)
    assert cuda.current_stream() is cuda.default_stream()
    a.record_stream(s)
    assert [e for e in cuda.log if e[0] == "op"] == [
        ("op", "default", "mul"), ("op", "default", "sum"), ("op", "side", "sum")
    ]  # fmt: skip
    assert cuda.log[-1] == ("record_stream", "side")


def _run(body):
    cuda = StreamRecorder()
    a, s = cuda.track(torch.ones(4)), cuda.Stream()
    body(cuda, a, s)
    return stream_hazards(cuda.log)


def test_hazards_of_the_notes_incorrect_example_and_its_fix():
    def racing(cuda, a, s):
        with cuda.stream(s):
            torch.sum(a)

    def fixed(cuda, a, s):
        s.wait_stream(cuda.default_stream())
        with cuda.stream(s):
            torch.sum(a)
        a.record_stream(s)
        cuda.current_stream().wait_stream(s)

    assert len(_run(racing)) == 3
    assert _run(fixed) == []


def test_waiting_the_wrong_way_round_is_still_a_race():
    def backwards(cuda, a, s):
        cuda.current_stream().wait_stream(s)  # default waits for side: does not order the read
        with cuda.stream(s):
            torch.sum(a)
        a.record_stream(s)
        cuda.current_stream().wait_stream(s)

    assert any("may start before" in h for h in _run(backwards))


def test_no_side_stream_work_is_reported():
    assert "no operation ran on the side stream" in _run(lambda cuda, a, s: torch.sum(a))[0]
