"""The recording stand-in for torch.cuda's streams names the races the CUDA notes describe."""

import torch

from course_utils.async_gpu.stream_model import StreamRecorder, stream_hazards


def test_recorder_logs_what_each_stream_made_and_read():
    cuda = StreamRecorder()
    a = cuda.track(torch.ones(3))
    s = cuda.Stream()
    (a * 2).sum()  # on the default stream
    with cuda.stream(s):
        assert cuda.current_stream() is s
        torch.sum(a)
    assert cuda.current_stream() is cuda.default_stream()
    a.record_stream(s)
    assert cuda.log[0] == ("made", "default", "A")
    assert [e for e in cuda.log if e[0] == "op"] == [
        ("op", "default", "mul", ("A",), "the mul result"),
        ("op", "default", "sum", ("the mul result",), "the sum result"),
        ("op", "side", "sum", ("A",), "the sum result"),
    ]
    assert cuda.log[-1] == ("record_stream", "A", "side")


def test_in_place_ops_keep_the_label_and_move_the_producer():
    cuda = StreamRecorder()
    a, s = cuda.track(torch.empty(4), "buffer"), cuda.Stream()
    with cuda.stream(s):
        a.normal_()  # the side stream now produces the buffer's values
    torch.sum(a)  # read on the default stream without waiting
    assert cuda.log[1] == ("op", "side", "normal_", ("buffer",), "buffer")
    hazards = stream_hazards(cuda.log, result_read_on=None)
    assert any(h.startswith("the default stream may read buffer before the side") for h in hazards)


def _run(body, result_read_on="default"):
    cuda = StreamRecorder()
    a, s = cuda.track(torch.ones(4)), cuda.Stream()
    body(cuda, a, s)
    return stream_hazards(cuda.log, result_read_on=result_read_on)


def racing(cuda, a, s):  # the CUDA notes' incorrect example
    with cuda.stream(s):
        torch.sum(a)


def notes_fix(cuda, a, s):  # later versions of the notes: A is safe; B is not used after
    s.wait_stream(cuda.default_stream())
    with cuda.stream(s):
        torch.sum(a)
    a.record_stream(s)


def returned_to_the_caller(cuda, a, s):  # B made on s, then used on the caller's stream
    notes_fix(cuda, a, s)
    with cuda.stream(s):
        b = torch.sum(a)
    b.record_stream(cuda.current_stream())
    cuda.current_stream().wait_stream(s)


def test_the_notes_incorrect_example_races_on_a_and_on_the_result():
    hazards = _run(racing)
    assert [h.split(":")[1].strip() for h in hazards] == [
        "call s.wait_stream(cuda.current_stream()) before the side-stream work",
        "call A.record_stream(s)",
        "call cuda.current_stream().wait_stream(s) before the default-stream work",
        "call .record_stream(cuda.current_stream()) on the sum result",
    ]


def test_the_notes_fix_is_safe_when_the_caller_uses_nothing():
    assert _run(notes_fix, result_read_on=None) == []
    assert _run(racing, result_read_on=None)[1:] == [
        "A may be freed and its memory reused "
        "while the side stream still reads it: "
        "call A.record_stream(s)"
    ]


def test_a_result_used_on_the_callers_stream_needs_a_wait_and_its_own_record_stream():
    assert _run(returned_to_the_caller) == []
    hazards = _run(notes_fix)  # waits for nothing and records nothing for the result
    assert len(hazards) == 2 and "record_stream(cuda.current_stream())" in hazards[1]


def test_waiting_the_wrong_way_round_is_still_a_race():
    def backwards(cuda, a, s):
        cuda.current_stream().wait_stream(s)  # default waits for side: does not order the read
        with cuda.stream(s):
            torch.sum(a)
        a.record_stream(s)
        cuda.current_stream().wait_stream(s)

    assert any("side stream may read A before the default stream" in h for h in _run(backwards))


def test_no_side_stream_work_is_reported():
    assert "no operation ran on the side stream" in _run(lambda cuda, a, s: torch.sum(a))[0]


def _backward_hazards(case):
    cuda = StreamRecorder()
    w = torch.ones(3, requires_grad=True)
    loss = cuda.track(torch.randn(4, 3), "x") @ w  # forward on the default stream
    case(loss, cuda.Stream(), cuda)
    assert w.grad is not None  # the real backward ran
    return stream_hazards(cuda.log, result_read_on=None)


def test_initial_gradient_made_in_the_side_stream_is_safe():
    def populated_in_side_stream(loss, s, cuda):
        with cuda.stream(s):
            loss.backward(gradient=torch.ones_like(loss))

    assert _backward_hazards(populated_in_side_stream) == []


def test_initial_gradient_made_outside_needs_wait_stream_and_record_stream():
    def populated_outside(loss, s, cuda):
        initial_grad = torch.ones_like(loss)
        with cuda.stream(s):
            loss.backward(gradient=initial_grad)

    def synchronized(loss, s, cuda):
        initial_grad = torch.ones_like(loss)
        s.wait_stream(cuda.current_stream())
        with cuda.stream(s):
            initial_grad.record_stream(s)
            loss.backward(gradient=initial_grad)

    unsafe = _backward_hazards(populated_outside)
    assert [h.split(":")[1].strip() for h in unsafe] == [
        "call s.wait_stream(cuda.current_stream()) before the side-stream work",
        "call .record_stream(s) on the ones_like result",
    ]
    assert _backward_hazards(synchronized) == []


def test_a_host_synchronize_after_the_read_also_keeps_the_memory():
    def synchronized_on_the_host(cuda, a, s):
        s.wait_stream(cuda.current_stream())
        with cuda.stream(s):
            torch.sum(a)
        s.synchronize()  # the host waits for the side stream: a can be freed afterwards

    assert _run(synchronized_on_the_host, result_read_on=None) == []
    # The caller's later use of the result is queued after the host wait: it needs its own.
    assert _run(synchronized_on_the_host) == [
        "the sum result may be freed and its memory reused while the default stream still "
        "reads it: call .record_stream(cuda.current_stream()) on the sum result"
    ]
