"""Lesson 02 checkers: pass on the reference, fail with a useful message on known-wrong answers."""

import torch

from course_utils.grading import run_check


def test_choose_device():
    def reference(disable):
        return torch.device("cuda" if not disable and torch.cuda.is_available() else "cpu")

    assert run_check("02.1", reference).passed
    ignores_flag = run_check(
        "02.1", lambda d: torch.device("cuda" if torch.cuda.is_available() else "cpu")
    )
    assert (
        ignores_flag.message
        == "choose_device(True): expected cpu when --disable-cuda is given, got cuda"
    )
    strings = run_check("02.1", lambda d: "cpu")
    assert strings.message == "expected a torch.device, got str"


def test_batch_to():
    assert run_check("02.2", lambda b, d: (b[0].to(d), b[1].to(d))).passed
    forgot_targets = run_check("02.2", lambda b, d: (b[0].to(d), b[1]))
    assert forgot_targets.message == "expected both tensors on the meta device, got ['meta', 'cpu']"


def test_add_noise():
    assert run_check("02.3", lambda x, s: x + s * torch.randn_like(x)).passed
    cpu_float = run_check("02.3", lambda x, s: x + s * torch.randn(x.shape))
    assert cpu_float.verdict == "failed"
    wrong_std = run_check("02.3", lambda x, s: x + torch.randn_like(x))
    assert "expected noise with standard deviation 0.1" in wrong_std.message


def test_ask_for_gpu():
    assert run_check("02.4", lambda c, g, n, w: n / g + w < n / c).passed
    always = run_check("02.4", lambda c, g, n, w: True)
    assert always.message == "ask_for_gpu(2000, 40000, 500000, 600): expected False, got True"
