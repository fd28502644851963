"""Exercise 08.3's harness: the two training jobs the check hands the learner's
`name_the_bottleneck` (a loader that counts its reads, one compute-bound, one loader-bound), the
probe that runs them in the learner's process and returns the traces their function wrote, and
the judge's reading of a trace (the loading share from the events, the fetches the loader handed
out). lesson08.py's checker holds each job to what its trace shows.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import time
from pathlib import Path

import torch

from course_utils import data, profiling, throughput
from course_utils.grading import CheckFailed, expect, probe

SLOW_READ = 8e-3  # seconds per image of the loader-bound job: 16 images, 128 ms per batch


class CountedImages(torch.utils.data.Dataset):
    """A data set that counts its reads; each read sleeps `delay` seconds (a large JPEG)."""

    def __init__(self, dataset, delay: float = 0.0):
        self.dataset, self.delay, self.reads = dataset, delay, 0

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        self.reads += 1
        return self.dataset[i]


# name: (batch size, seconds per image read)
PROFILE_JOBS = {"compute": (128, 0.0), "loader": (16, SLOW_READ)}


def _profile_job(batch: int, delay: float):
    """A job to profile on the CPU, its model warmed up by one step first (oneDNN's first call
    is slow): a fast loader (compute limits it) or one that takes about 130 ms per batch of 16,
    many times the step's computation even on a busy machine (loading limits it)."""
    images = CountedImages(data.SyntheticCIFAR10(train=True, size=256), delay)
    model, optimizer = throughput.build(throughput.NAIVE, "cpu")
    model(torch.randn(batch, 3, 32, 32)).sum().backward()
    optimizer.zero_grad(set_to_none=True)
    loader = torch.utils.data.DataLoader(images, batch_size=batch, shuffle=True)
    return images, model, loader, optimizer


@contextlib.contextmanager
def _one_thread():
    """One torch thread while the jobs run: on a busy machine, threads that wait for each
    other at every operator make the computation's time swing by ten times and more."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _events(trace_path: Path) -> list | None:
    """The trace's complete events, only the fields the judge reads, or None: no trace."""
    if not trace_path.is_file():
        return None
    try:
        events = profiling.read_trace(trace_path)
    except (ValueError, KeyError):
        return []
    keep = ("name", "cat", "ts", "dur")
    return [{k: e[k] for k in keep if k in e} for e in events]


@probe("08.3")
def run_name_the_bottleneck(name_the_bottleneck):
    """In the learner's process: each job through their function, and the trace it wrote."""
    found = {}
    with tempfile.TemporaryDirectory() as tmp, _one_thread():
        for kind, (batch, delay) in PROFILE_JOBS.items():
            images, model, loader, optimizer = _profile_job(batch, delay)
            trace = Path(tmp) / f"{kind}-bound.json"
            start = time.perf_counter()
            answer = name_the_bottleneck(model, loader, optimizer, trace)
            seconds = time.perf_counter() - start
            found[kind] = {
                "answer": answer,
                "events": _events(trace),
                "reads": images.reads,
                "seconds": seconds,
            }
    return found


def _fetches(events: list, where: str) -> list[dict]:
    fetches = [
        e
        for e in events
        if str(e.get("name", "")).startswith(profiling.LOADER_EVENT) and e.get("cat") != "Trace"
    ]
    if not fetches:
        raise CheckFailed(
            f"{where}: expected the loader iterated inside the profile, got a trace without "
            f"{profiling.LOADER_EVENT}... events: the loader was not iterated inside the profile; "
            "profile the whole loop, the `for` over the loader included"
        )
    return fetches


def verify_job(kind: str, got: dict) -> float:
    """One job's answer against its trace, read by the judge; the loading share."""
    batch, delay = PROFILE_JOBS[kind]
    where = f"on the check's {kind}-bound job"
    events = got["events"]
    expect(
        events is not None,
        "a torch.profiler trace at trace_path (prof.export_chrome_trace(trace_path))",
        "no file there",
        where,
    )
    expect(
        any("convolution_backward" in str(e.get("name", "")) for e in events),
        "the whole training step inside the profile (forward, backward, optimizer step)",
        "a trace without the backward pass",
        where,
    )
    fetches = _fetches(events, where)
    batches = math.ceil(got["reads"] / batch)
    expect(  # a pass that reaches the loader's end asks once more, and finds nothing
        len(fetches) <= batches + 1,
        f"at most one fetch in the trace per batch the loader handed out ({batches}), and one "
        "that found its end",
        f"{len(fetches)} fetches: profile the run that read the batches",
        where,
    )
    floor = batch * delay * 1e6 * 0.9  # microseconds each fetch must at least take
    short = [e for e in fetches if float(e["dur"]) < floor]
    expect(
        not short,
        f"fetches of at least {floor / 1e3:.0f} ms (each of its batches sleeps that long)",
        f"{len(short)} shorter ones",
        where,
    )
    try:
        share = profiling.loading_share(events)
    except (ValueError, KeyError, TypeError) as e:
        raise CheckFailed(f"{where}: {e}") from None
    span_end = max(float(e["ts"]) + float(e["dur"]) for e in events)
    span = (span_end - min(float(e["ts"]) for e in fetches)) / 1e6
    expect(
        span <= got["seconds"] + 0.05,
        f"a profile within the {got['seconds']:.2f} s your function ran",
        f"a trace of {span:.2f} s",
        where,
    )
    limit = "loader" if share > 0.5 else "compute"
    expect(
        got["answer"] == limit,
        f"{limit!r} (your trace: fetching batches took {share:.0%} of the profiled loop)",
        repr(got["answer"]),
        where,
    )
    expect(
        limit == kind,
        f"a {kind}-bound trace",
        f"{share:.0%} loading",
        f"{where} (the machine too busy to tell? run the check again)",
    )
    return share
