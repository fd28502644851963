"""The jobs of 02.2 and 08.3 as Slurm recorded them: a learner's function run by the course's
program in a job they submitted (`answer_jobs`), held to what the exercise asks of its result.
The record's owner, account, window, stored script, state and digest are `slurm_record`'s; each
function here reads what the program left in the job's comment.
"""

from __future__ import annotations

import math
import re

from course_utils import answer_jobs, cpu_sweep
from course_utils.grading import CheckFailed, expect
from course_utils.grading.checks import slurm_record

# A rate on n threads may exceed n x the 1-thread rate by this factor. The bound refuses rates
# no machine gives (a sweep typed in, not measured), not noise: on a node that other work shares,
# a 1-thread run can be slowed while the n-thread run is not; one sweep of an honest learner's
# function on a shared 2-CPU test node gave 3.0x on 2 threads. The job keeps the median of
# several sweeps (course_utils.jobs.thread_sweep), and the bound leaves room beyond that.
MARGIN = 2.0


def read_named(exercise_id: str, jobs, digest) -> list[str]:
    """The jobs the learner's list for `exercise_id` names (`jobs`: the check's argument for it,
    or None), each held to Slurm's record and to the learner's function now (`digest()`, called
    only where a job is named); with none, NotAttempted where the course requires a job.
    Returns the ids."""
    listed, read_job = READERS[exercise_id]
    named = slurm_record.named_jobs(jobs.value() if jobs is not None else None, listed)
    if named:
        now = digest()
        for job_id in named:
            read_job(job_id, now)
    else:
        slurm_record.needs_a_job(exercise_id, "the sbatch command the cell after the check prints")
    return named


def _rate(x) -> bool:
    return type(x) is float and math.isfinite(x) and x > 0


def thread_sweep(job_id: str, digest: str | None) -> None:
    """02.2's job as Slurm recorded it (`answer_jobs.THREAD_SWEEP`): the learner's, the lesson's
    script, COMPLETED, run on the thread_rates in their cell now; the rates it left cover every
    count of `cpu_sweep.counts` for the CPUs the job was given, each a rate, and none more than
    its threads can give over one thread's rate (MARGIN)."""
    record, result = slurm_record.answer_job(job_id, "02.2", answer_jobs.THREAD_SWEEP, digest)
    what = f"job {job_id}"
    try:
        rates = cpu_sweep.parse_rates(result.removeprefix("rates "))
    except ValueError as e:
        raise CheckFailed(f"{what}: expected the rates the job measured, got {e}") from None
    job = slurm_record.job_line(record)
    cpus = job.alloc_cpus if job is not None and job.alloc_cpus else 1
    want = cpu_sweep.counts(cpus)
    expect(
        sorted(rates) == want,
        f"rates at {want} thread(s), the counts for the job's {cpus} CPU(s)",
        sorted(rates),
        what,
    )
    for n in want:
        expect(_rate(rates[n]), f"{n} thread(s): images per second", repr(rates[n]), what)
        expect(
            rates[n] <= rates[1] * n * MARGIN,
            f"{n} thread(s): at most {n} x the 1-thread rate (and a margin)",
            f"{rates[n]:,.0f} against {rates[1]:,.0f} images/s on 1",
            what,
        )
    slurm_record.note(slurm_record.sacct_evidence(record) + f", rates at {want} thread(s)")


JOB_RESULT = re.compile(
    r"^compute (?P<compute>[\d.]+) (?P<c>\S+) loader (?P<loader>[\d.]+) (?P<l>\S+)$"
)


def bottleneck(job_id: str, digest: str | None) -> None:
    """08.3's job as Slurm recorded it (`answer_jobs.BOTTLENECK`): the learner's, the lesson's
    script, COMPLETED, run on the name_the_bottleneck in their cell now; in it, their function
    named each of the two jobs as the loading share the program read from its trace says (over
    half: "loader"), and the shares are the jobs' own (the loader-bound job's over half, the
    compute-bound job's under)."""
    record, result = slurm_record.answer_job(job_id, "08.3", answer_jobs.BOTTLENECK, digest)
    what = f"job {job_id}"
    found = JOB_RESULT.match(result)
    expect(found is not None, "each job's loading share and the name given", result, what)
    for kind, share, said in (("compute", "compute", "c"), ("loader", "loader", "l")):
        value = float(found[share])
        want = "loader" if value > 0.5 else "compute"
        expect(
            found[said] == want,
            f"{want!r} for the {kind}-bound job (loading {value:.0%} of the loop)",
            repr(found[said]),
            what,
        )
        expect(
            want == kind,
            f"the {kind}-bound job's profile, its loading share on its side of half",
            f"{value:.0%}: profile the loop of the job you were given",
            what,
        )
    slurm_record.note(slurm_record.sacct_evidence(record) + ", both jobs named right")


# Each exercise's list of job ids in the notebook, and the reader of one job's record.
READERS = {"02.2": ("THREAD_JOBS", thread_sweep), "08.3": ("BOTTLENECK_JOBS", bottleneck)}
