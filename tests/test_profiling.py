"""profile_call exports a Chrome trace that read_trace and busiest can read back."""

import torch

from course_utils import profiling
from course_utils.profiling import busiest, profile_call, read_trace


def test_profile_call_exports_and_reads_back_a_trace(tmp_path):
    a = torch.randn(128, 128)
    path = tmp_path / "runs" / "trace.json"
    prof = profile_call(lambda: torch.relu(a @ a), trace_path=path)
    assert path.exists()
    names = {e.key for e in prof.key_averages()}
    assert "aten::mm" in names
    events = read_trace(path)
    assert all(e["ph"] == "X" for e in events)
    top = dict(busiest(events, top=50))
    assert "aten::mm" in top and top["aten::mm"] > 0


def test_nvtx_ranges_name_the_block_and_nest(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: calls.append(("push", name)))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: calls.append(("pop",)))
    with profiling.nvtx_range("train step 0"):
        with profiling.nvtx_range("forward"):
            pass
    assert calls == [("push", "train step 0"), ("push", "forward"), ("pop",), ("pop",)]
    with profiling.nvtx_range("off", enabled=False):
        pass
    assert len(calls) == 4  # disabled: nothing recorded (a CPU run)
