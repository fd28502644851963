"""Checkers of lesson 08, making training fast.

08.1 and 08.3 are the learner's own runs, read in their process by a probe. 08.1 hands their
`time_loader` a loader (`LoggedLoader`) that logs each batch it hands out and when; the judge
requires exactly the batches asked for, a rate the log supports, and a rate of the size of its
own timing of the same loader in its own process. 08.3 hands their `name_the_bottleneck` two
training jobs of the course's (a model, a loader that counts its batches, an optimizer, a trace
path); the probe returns the traces their function wrote, and the judge computes the loading
share from the events itself, requires as many fetches in the trace as the loader handed out
(and, where a batch costs a known sleep, fetches that long), and the name their trace supports.
The loader, the jobs and their probes are in probes/lesson08.py.
08.2 and 08.4 are decisions on plain data, with held-out cases; 08.4's reference is
`how_many.choose`, the one rule lessons 08 and 10 teach.
"""

import functools
import math
import random
import time

from course_utils import how_many, profiling, speed, throughput
from course_utils.grading import (
    CheckFailed,
    NotAttempted,
    call_answer,
    exercise,
    expect,
    held_out,
    run_probe,
)
from course_utils.grading.checks import answer_job_records, slurm_record
from course_utils.grading.probes import lesson08 as probes
from course_utils.jobs.bottleneck_job import PROFILE_JOBS

SAME_SIZE = 3.0  # the learner's rate within this factor of the judge's own timing
SLACK = 1.5  # a rate this far below what the loader's own log saw (the learner's loop overhead)


def _number(x) -> bool:
    return type(x) in (int, float) and math.isfinite(x) and x > 0


# ---- 08.1 ---------------------------------------------------------------------------------


def own_loader_rate(sizes, delay: float, batches: int) -> float:
    """The judge's own timing of the same loader, in its own process."""
    return throughput.time_loader(probes.LoggedLoader(sizes, delay), batches)


# the visible case: full and small batches, so that counting batch_size x batches is wrong
LOADER_SIZES, LOADER_DELAY, LOADER_BATCHES = [16, 2, 2, 2, 16, 16], 0.02, 4


@exercise(
    "08.1",
    "time the data loader alone",
    reference=(r"throughput\.time_loader", r"import .*\btime_loader"),
)
def check_time_loader(
    time_loader, sizes=tuple(LOADER_SIZES), delay=LOADER_DELAY, batches=LOADER_BATCHES
):
    sizes = list(sizes)
    start = time.perf_counter()
    got = run_probe(probes.run_time_loader, time_loader, sizes=sizes, delay=delay, batches=batches)
    wall = time.perf_counter() - start
    handed, rate = got["handed"], got["rate"]
    if not handed:
        raise NotAttempted(
            "run the loader first: your time_loader returned without taking a batch from the "
            "loader it was given (iterate it, counting images, between two clock readings)"
        )
    what = f"time_loader(loader, {batches}) on a loader of batches {sizes}, {delay * 1e3:g} ms each"
    expect(
        len(got["passes"]) == 1 and len(handed) == batches,
        f"exactly {batches} batches taken in one pass over the loader",
        f"{len(handed)} batches in {len(got['passes'])} pass(es)",
        what,
    )
    expect(_number(rate), "a rate in images per second (a positive number)", repr(rate), what)
    images = sum(sizes[:batches])
    logged = [size for size, _ in handed]
    expect(logged == sizes[:batches], f"the batches {sizes[:batches]}", logged, what)
    span = handed[-1][1] - got["passes"][0]
    least = batches * delay  # each batch sleeps `delay` before it is handed out
    expect(
        least * 0.95 <= span <= wall + 0.05 and wall >= least * 0.95,
        f"a log within the {wall:.2f} s the run took, of at least the {least:.2f} s its "
        "batches take",
        f"{span:.2f} s",
        what,
    )
    supported = images / span
    expect(
        supported / SLACK <= rate <= supported * 1.05,
        f"{images} images over the seconds the batches took to come: about {supported:,.0f} "
        "images/s as the loader's own log saw it (count the images in each batch, the last may "
        "be smaller, and time from before the first batch to after the last)",
        f"{rate:,.0f} images/s",
        what,
    )
    own = own_loader_rate(sizes, delay, batches)
    expect(
        own / SAME_SIZE <= rate <= own * SAME_SIZE,
        f"about {own:,.0f} images/s, as the check timed the same loader",
        f"{rate:,.0f} images/s",
        what,
    )
    return (
        f"exactly {batches} batches ({images} images) taken, at the rate the loader's log and "
        "the check's own timing of it show"
    )


# ---- 08.2 ---------------------------------------------------------------------------------

# (loader alone, compute alone, the job as measured): images per second, each from a profile
BOTTLENECK_CASES = [
    (2000.0, 8000.0, 1600.0),  # loader-bound, no overlap yet
    (9000.0, 3000.0, 2250.0),  # compute-bound, no overlap yet
    (4000.0, 4000.0, 3900.0),  # balanced, already overlapping
    (500.0, 40000.0, 490.0),  # loader-bound, nearly all loading: a faster loader is the only fix
]


def _bottleneck_case(bottleneck, case) -> None:
    want_limit, want_bound = speed.bottleneck(*case)
    where = "bottleneck(loader_rate={:g}, compute_rate={:g}, measured_rate={:g})".format(*case)
    got = call_answer(bottleneck, *case)
    expect(type(got) is tuple and len(got) == 2, "a pair (limit, bound)", repr(got), where)
    limit, bound = got
    expect(limit == want_limit, repr(want_limit), repr(limit), where)
    expect(
        _number(bound) and abs(bound - want_bound) < 1e-6 * want_bound,
        f"at most {want_bound:.3g}x (the slower part's rate / the measured rate: loading "
        "and computing overlapped, the step takes as long as the slower one)",
        f"{bound!r}",
        where,
    )


@exercise(
    "08.2",
    "which part limits the job, and how much faster could it go?",
    reference=(r"speed\.bottleneck", r"import .*\bbottleneck"),
)
def check_bottleneck(bottleneck):
    for case in BOTTLENECK_CASES:
        _bottleneck_case(bottleneck, case)
    return "the slower of loading and computing bounds the job, once they overlap"


# ---- 08.3 ---------------------------------------------------------------------------------


@exercise(
    "08.3",
    "profile your own training step and name its bottleneck",
    allows=("opens or removes files",),
)
def check_name_the_bottleneck(name_the_bottleneck, jobs=None):
    digest = functools.partial(run_probe, probes.name_the_bottleneck_digest, name_the_bottleneck)
    named = answer_job_records.read_named("08.3", jobs, digest)
    found = run_probe(probes.run_name_the_bottleneck, name_the_bottleneck)
    if not any(job["reads"] for job in found.values()):
        raise NotAttempted(
            "run the jobs first: your name_the_bottleneck returned without training on the "
            "loader it was given (profile a few steps of profiling.documentation_loop)"
        )
    for kind in PROFILE_JOBS:
        verify_job(kind, found[kind])
    here = "your function run by the check on its own two jobs, here"
    slurm_record.note(f"and {here}" if named else here)
    # the shares vary from run to run; the pass line does not (nbval compares it)
    return "your traces of the check's compute-bound and loader-bound jobs, each named right"


# ---- 08.4 ---------------------------------------------------------------------------------

# Measured throughput (images/s) of one training with 1, 2, 4 and 8 GPUs (DDP on one node):
# 95%, 85% and 60% efficient.
GPU_RATES = {1: 1000.0, 2: 1900.0, 4: 3400.0, 8: 4800.0}
WORK = 36_000_000  # images: 720 epochs of 50,000
# (deadline in hours or None, efficiency floor)
GPU_CASES = [(12.0, 0.8), (6.0, 0.8), (3.0, 0.8), (2.0, 0.8), (None, 0.8), (2.5, 0.5)]


def _gpus_case(gpus_to_ask_for, rates: dict, work: int, deadline, floor: float) -> None:
    want = how_many.choose(rates, work, deadline, min_efficiency=floor)
    got = call_answer(gpus_to_ask_for, dict(rates), work, deadline, floor)
    shown = {n: round(r) for n, r in rates.items()}
    where = f"gpus_to_ask_for({shown}, work={work:,}, deadline_hours={deadline}, {floor:g})"
    expect(
        type(got) is tuple and len(got) == 2,
        "a pair (GPU count, meets the deadline)",
        repr(got),
        where,
    )
    gpus, meets = got
    expect(
        (gpus, meets) == (want.gpus, want.meets_deadline)
        and type(gpus) is int
        and type(meets) is bool,
        f"({want.gpus}, {want.meets_deadline}): {want.why} ({want.hours:.1f} h, "
        f"{want.gpu_hours:.1f} GPU-hours, {want.efficiency:.0%} efficient)",
        repr(got),
        where,
    )


@exercise(
    "08.4",
    "how many GPUs to ask for: the deadline and the efficiency",
    reference=(r"how_many\.choose", r"import how_many|how_many import"),
)
def check_gpus_to_ask_for(gpus_to_ask_for):
    for deadline, floor in GPU_CASES:
        _gpus_case(gpus_to_ask_for, GPU_RATES, WORK, deadline, floor)
    return (
        "the fewest GPUs that meet the deadline at the efficiency floor, and the fastest "
        "efficient count, said so, when none does"
    )


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


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("08.1", cases=1)
def held_out_time_loader(rng, time_loader):
    """Other batch sizes, delay and count: a rate typed in, or a count of the visible batches'
    images, fails (these sizes hold several times as many images)."""
    sizes = [rng.randint(24, 64) for _ in range(6)]
    check_time_loader(
        time_loader, sizes=sizes, delay=rng.choice([0.01, 0.015, 0.025]), batches=rng.randint(3, 5)
    )


@held_out("08.2", cases=3)
def held_out_bottleneck(rng, bottleneck):
    """Other rates: a table of the four visible answers fails them."""
    loader, compute = rng.uniform(200, 20000), rng.uniform(200, 20000)
    measured = min(loader, compute) * rng.uniform(0.4, 1.0)
    _bottleneck_case(bottleneck, (round(loader), round(compute), round(measured, 1)))


def _rates(rng: random.Random) -> dict:
    """A scaling curve: each doubling keeps 70-99% of the previous count's efficiency."""
    one, rates, efficiency = rng.choice([500.0, 1000.0, 2500.0]), {}, 1.0
    for n in (1, 2, 4, 8, 16):
        rates[n] = round(one * n * efficiency, 1)
        efficiency *= rng.uniform(0.7, 0.99)
    return rates


@held_out("08.4", cases=4)
def held_out_gpus_to_ask_for(rng, gpus_to_ask_for):
    """Other scaling curves, workloads, deadlines and floors: the visible answers typed in
    fail them."""
    rates, work = _rates(rng), rng.choice([1, 3, 10]) * 10**7
    deadline = rng.choice([None, 1.0, 2.0, 4.0, 8.0, 24.0])
    _gpus_case(gpus_to_ask_for, rates, work, deadline, rng.choice([0.5, 0.7, 0.8, 0.9]))
