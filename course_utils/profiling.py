"""Where the time goes (lessons 03, 04 and 08): torch.profiler made quiet and readable (profile a
call, export its trace, read the trace back), with each operator's self time
(`operator_self_times`, lesson 03) and the dtypes its inputs had (`dtypes_by_operator`: what ran
in bfloat16 under autocast, lesson 04); the share of a loop spent waiting for its batches
(`loading_share`, exercise 08.3); and line_profiler over the documentation's training loop,
one statement per line (`profile_lines`, `line_report`, `documentation_loop`, lesson 08)."""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import warnings
from collections import Counter
from pathlib import Path

import torch
from torch import nn

from course_utils.paths import REPO_ROOT


def quiet_profiler_logs() -> None:
    """Silence Kineto's C++ log lines (timestamped, so they differ on every run), unless set.

    Kineto reads KINETO_LOG_LEVEL when the first profiler starts in a process; 6 is past its
    highest level. Call this before the first profile.
    """
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")


@contextlib.contextmanager
def quiet_profiler_warnings():
    """Without torch.profiler's note that it "clears events at the end of each cycle", which
    some releases (2.11) print at the first profile of a process whatever its cycles."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
        yield


def profile_call(fn, *args, trace_path: str | os.PathLike | None = None, cuda=False, **kwargs):
    """Run `fn(*args, **kwargs)` under torch.profiler (CPU, and CUDA when `cuda`); return it.

    With `trace_path`, also export a Chrome trace (open it in https://ui.perfetto.dev).
    """
    from torch.profiler import ProfilerActivity, profile

    quiet_profiler_logs()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with quiet_profiler_warnings(), profile(activities=activities, record_shapes=True) as prof:
        fn(*args, **kwargs)
        if cuda:
            torch.cuda.synchronize()  # the GPU work must finish inside the profile
    if trace_path is not None:
        Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace_path))
    return prof


@contextlib.contextmanager
def nvtx_range(name: str, enabled: bool = True):
    """An NVTX range around a block, so that Nsight Systems' timeline shows it by name
    (slurm/profile_job.sh records NVTX); a no-op when not enabled (no GPU)."""
    if not enabled:
        yield
        return
    torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()


def read_trace(path: str | os.PathLike) -> list[dict]:
    """The complete events ("ph": "X", with a duration) of an exported Chrome trace."""
    events = json.loads(Path(path).read_text())["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and "dur" in e]


def busiest(events: list[dict], top: int = 5) -> list[tuple[str, float]]:
    """Total duration in microseconds per event name, largest first (nested events overlap)."""
    total: Counter = Counter()
    for e in events:
        total[e["name"]] += float(e["dur"])
    return total.most_common(top)


# torch's DataLoader names each batch it hands out "enumerate(DataLoader)#<its iterator>.__next__"
LOADER_EVENT = "enumerate(DataLoader)#"


def loading_share(events: list[dict]) -> float:
    """The share of a profiled training loop spent waiting for the DataLoader's batches.

    `events`: a trace's complete events (`read_trace`). The loop's span runs from the first
    batch fetched to the last event's end; the share is the fetches' total time over it. A
    trace that holds no fetch (the loader was not iterated inside the profile) is a ValueError.
    """
    ops = [e for e in events if e.get("cat") != "Trace"]  # the profiler's own span
    fetches = [e for e in ops if e["name"].startswith(LOADER_EVENT)]
    if not fetches:
        raise ValueError(
            f"no {LOADER_EVENT}... events in the trace: the loader was not iterated inside the "
            "profile; profile the whole loop, the `for` over the loader included"
        )
    start = min(float(e["ts"]) for e in fetches)
    end = max(float(e["ts"]) + float(e["dur"]) for e in ops)
    return sum(float(e["dur"]) for e in fetches) / (end - start)


def line_report(profiler) -> str:
    """line_profiler's report, with the file named relative to the course folder (not the
    installation path) and times in milliseconds."""
    text = io.StringIO()
    profiler.print_stats(stream=text, output_unit=1e-3)
    return text.getvalue().replace(f"{REPO_ROOT}/", "")


def documentation_loop(model, loader, optimizer, device="cpu", steps: int | None = None) -> int:
    """The training loop as the documentation writes it, one statement per line, so that
    line_profiler can attribute time to loading, forward, backward and the optimizer step.
    Returns the number of images trained on."""
    loss_fn, images = nn.CrossEntropyLoss(), 0
    for step, (inputs, targets) in enumerate(loader):
        inputs, targets = inputs.to(device), targets.to(device)
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        images += len(targets)
        if steps is not None and step + 1 >= steps:
            break
    return images


def profile_lines(fn, *args, **kwargs):
    """Run `fn(*args, **kwargs)` under line_profiler; return (profiler, {line: share of time}).

    The shares are of `fn`'s total time, keyed by the stripped source line. Needs the
    line_profiler package (ImportError with the install command otherwise).
    """
    try:
        from line_profiler import LineProfiler
    except ImportError as e:
        raise ImportError("line_profiler is not installed: pip install line_profiler") from e
    profiler = LineProfiler(fn)
    profiler.runcall(fn, *args, **kwargs)
    source, first = inspect.getsourcelines(fn)
    timings = next(iter(profiler.get_stats().timings.values()))
    total = sum(t for _, _, t in timings) or 1
    shares = {source[line - first].strip(): t / total for line, _, t in timings}
    return profiler, shares


def operator_self_times(events: list[dict]) -> Counter:
    """Self time in microseconds per operator name, from a trace's events (`read_trace`).

    An operator's self time is its duration less that of the operators it calls (its direct
    children on the same thread): what `key_averages()` reports as self CPU time, but read from
    the exported trace. Only operator events count ("cat": "cpu_op"); annotations do not.
    """
    ops = sorted(
        (e for e in events if e.get("cat") == "cpu_op"),
        key=lambda e: (e.get("pid"), e.get("tid"), float(e["ts"]), -float(e["dur"])),
    )
    own: Counter = Counter()
    stack: list[tuple[tuple, float, str]] = []  # (thread, end time, name) of open operators
    for e in ops:
        thread, start, dur = (e.get("pid"), e.get("tid")), float(e["ts"]), float(e["dur"])
        while stack and (stack[-1][0] != thread or stack[-1][1] <= start):
            stack.pop()
        if stack:
            own[stack[-1][2]] -= dur  # the parent's time spent in this child is not its own
        own[e["name"]] += dur
        stack.append((thread, start + dur, e["name"]))
    return own


_DTYPES = {
    "float": "float32",
    "c10::BFloat16": "bfloat16",
    "c10::Half": "float16",
    "double": "float64",
}


def dtypes_by_operator(events: list[dict]) -> dict[str, set[str]]:
    """The floating-point dtypes each operator's tensor inputs had, per call, from a trace
    recorded with shapes (`profile_call` records them): {"aten::addmm": {"bfloat16"}, ...}.

    A call whose inputs mix dtypes counts as "mixed" (under autocast, the outer dispatch of an
    op still sees float32 weights; the call it makes after casting sees bfloat16 only).
    """
    found: dict[str, set[str]] = {}
    for e in events:
        kinds = {_DTYPES[t] for t in e.get("args", {}).get("Input type", []) if t in _DTYPES}
        if e.get("cat") == "cpu_op" and kinds:
            found.setdefault(e["name"], set()).add(kinds.pop() if len(kinds) == 1 else "mixed")
    return found
