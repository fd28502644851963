"""course_utils.profiling: profile_call exports a Chrome trace that read_trace and busiest read
back; line_profiler shares and report over the documentation's loop."""

import torch

from course_utils import data, models, profiling, throughput
from course_utils.paths import REPO_ROOT
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


TINY = data.SyntheticCIFAR10(train=True, size=256)


def test_documentation_loop_and_line_shares():
    model = models.Net()
    before = model.fc3.bias.detach().clone()
    loader = data.make_loader(TINY, batch_size=32)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert profiling.documentation_loop(model, loader, opt, steps=2) == 64
    assert not torch.equal(before, model.fc3.bias)
    _, shares = profiling.profile_lines(profiling.documentation_loop, model, loader, opt, steps=2)
    assert "loss.backward()" in shares and abs(sum(shares.values()) - 1) < 1e-6


def test_line_report_names_the_file_inside_the_course(monkeypatch):
    model, optimizer = throughput.build(throughput.NAIVE, "cpu")
    loader = throughput.make_loader(throughput.NAIVE, TINY, "cpu")
    profiler, _ = profiling.profile_lines(
        profiling.documentation_loop, model, loader, optimizer, steps=1
    )
    report = profiling.line_report(profiler)
    assert "File: course_utils/profiling.py" in report and str(REPO_ROOT) not in report
