"""Checkers of lesson 00, setup and environment.

00.1 is a run: the learner's script for the documentation's session is read as sbatch reads it,
then their script for this machine runs as a job (submitted where Slurm answers, else its
commands run here by bash: `batch.run_script`, through the learner's own function), and the
`course doctor` report in the job's output is what is graded; on Slurm, the scheduler's record
of that job (sacct) must show it completed with what the script asked for.
00.4 is a run: the learner's function measures fresh imports of torch; a probe reads the records
their run wrote, and the checker compares cold with warm (unless the cold import could not be
made cold: pages a running process maps stay cached) and the warm import with one of its own.
"""

import os
import sys

from course_utils import accounting, import_cost
from course_utils.doctor import gpu as gpu_rules
from course_utils.doctor import versions
from course_utils.grading import (
    CheckFailed,
    NotAttempted,
    call_answer,
    exercise,
    expect,
    held_out,
    run_probe,
)
from course_utils.grading.checks import lesson00_script as script_rules
from course_utils.grading.checks import slurm_record
from course_utils.grading.probes import lesson00 as probes

# What the documentation's cluster needs before `course doctor` (exercise 00.1's visible case).
DOCUMENTATION_SETUP = "module load python/3.11\nsource ~/venvs/course/bin/activate"
REPORT_TOPICS = ("python", "pytorch", "torchvision", "slurm job")


def _report_rows(output: str) -> dict[str, str]:
    """`course doctor`'s table in a job's output: topic -> the rest of its row."""
    rows = {}
    for line in output.splitlines():
        for topic in REPORT_TOPICS:
            if line.startswith(topic + " ") and "[" in line:
                rows[topic] = line[len(topic) :].strip()
    return rows


def _scheduler_says(job_id: str, ran: dict) -> None:
    """The judge reads the scheduler's own record of the learner's job."""
    steps = accounting.ended_job_steps(job_id)
    expect(bool(steps), f"sacct's record of job {job_id}", "none (is accounting on?)")
    job = next(s for s in steps if not s.is_step)
    expect(job.state == "COMPLETED", f"job {job_id} COMPLETED in sacct", job.state)
    expect(
        job.alloc_cpus >= 7 and job.alloc_tres.get("gres/gpu") == "1",
        "at least 7 CPUs (a node that allocates whole cores rounds up) and 1 GPU allocated, as "
        "the session asks",
        f"AllocTRES {','.join(f'{k}={v}' for k, v in job.alloc_tres.items())}",
    )


@exercise(
    "00.1",
    "the documentation's interactive session as a batch job running course doctor",
    allows=("opens or removes files", "starts processes"),
)
def check_doctor_job(doctor_job, run_doctor_job, jobs=None):
    """`doctor_job(partition, setup)` returns the batch script; `run_doctor_job(script, folder)`
    runs it as a job (batch.run_script) and returns the job; `jobs` (DOCTOR_JOBS) names the
    doctor jobs the learner submitted on the cluster, which Slurm's record then decides."""
    script = call_answer(doctor_job, "alpha", DOCUMENTATION_SETUP)
    expect(type(script) is str, "the batch script as a string", type(script).__name__)
    script_rules.check_header(script)
    script_rules.check_body(script)
    named = slurm_record.named_jobs(jobs.value() if jobs is not None else None, "DOCTOR_JOBS")
    if named:
        for job_id in named:
            _doctor_job_in_sacct(job_id)
        return DOCTOR_PASSED
    slurm_record.needs_a_job(
        "00.1", "sbatch the script doctor_job writes for this cluster; DOCTOR_JOBS = [its id]"
    )
    ran = run_probe(probes.run_the_job, doctor_job, run_doctor_job)
    expect(ran.get("kind") == "Job", "the job batch.run_script returned", ran.get("kind"))
    if ran.get("state") == "PENDING":
        said = ran["output"].strip().splitlines()[-1] if ran["output"].strip() else ""
        raise NotAttempted(
            f"your job {ran['job_id']} is pending: it did not start ({said}). Nothing is wrong "
            f"with your script for that: run the check again when partition "
            f"{ran.get('partition')} has room (squeue -u $USER shows your jobs and their reason)"
        )
    rows = _report_rows(ran["output"])
    missing = [t for t in REPORT_TOPICS if t not in rows]
    expect(
        not missing,
        "`course doctor`'s report in the job's output",
        f"no {', '.join(missing)} row: {ran['output'][-300:]!r}",
    )
    import torch

    expect(
        rows["pytorch"].split()[-1] == torch.__version__,
        f"the report of this environment (PyTorch {torch.__version__})",
        rows["pytorch"],
    )
    if ran["launcher"] == "slurm":
        expect(
            ran["job_id"] and ran["job_id"] in rows["slurm job"],
            f"the report of job {ran['job_id']} itself",
            rows["slurm job"],
        )
        _scheduler_says(ran["job_id"], ran)
    slurm_record.note(f"your job run by your function ({ran['launcher']}), its report read")
    return DOCTOR_PASSED


# One line wherever the job ran (nbval compares it): the evidence column says which route.
DOCTOR_PASSED = (
    "same resources as the session, 10 minutes at most, course doctor first; your job's "
    "course doctor report read (and on Slurm, sacct's record of the job)"
)


def _doctor_job_in_sacct(job_id: str) -> None:
    """A doctor job the learner names: theirs, for the course, COMPLETED with the session's
    resources, and the script Slurm stored keeps the exercise's rules."""
    record = slurm_record.learner_job(job_id, "00.1")
    _scheduler_says(job_id, {})
    what = f"the script Slurm stored for job {job_id}"
    expect(record.script is not None, what, "none (is AccountingStoreFlags=job_script set?)")
    try:
        script_rules.check_header(record.script, partition=None)
        script_rules.check_body(record.script)
    except CheckFailed as e:
        raise CheckFailed(f"{what}: {e}") from None
    slurm_record.note(slurm_record.sacct_evidence(record))


@exercise("00.2", "does this torchvision belong to this PyTorch?")
def check_pairing(compatible):
    cases = {
        ("2.14.1", "0.29.1"): True,
        ("2.11.0+cu130", "0.26.0+cu130"): True,
        ("2.6.0", "0.21.0"): True,
        ("2.14.1", "0.24.1"): False,
        ("2.9.1", "0.29.1"): False,
    }
    for (torch_v, tv_v), want in cases.items():
        got = call_answer(compatible, torch_v, tv_v)
        if got is not want:
            raise CheckFailed(f"compatible({torch_v!r}, {tv_v!r}): expected {want}, got {got!r}")
    return "torchvision 0.(N+15) pairs with torch 2.N"


# A wheelhouse with three CUDA builds of one PyTorch release, newest first, and the architectures
# each was compiled for (what torch.cuda.get_arch_list() prints in it).
WHEELHOUSE = [
    {
        "tag": "cu130",
        "cuda": "13.0",
        "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
    },
    {
        "tag": "cu128",
        "cuda": "12.8",
        "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
    },
    {
        "tag": "cu126",
        "cuda": "12.6",
        "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
    },
]
# (GPU, driver, compute capability) -> the newest build that runs there, or None: what the
# course's one build rule (gpu.build_verdict, lessons 00 and 07) gives, which the check applies.
NODES = [
    ("H100", "580.65.06", (9, 0), "cu130"),
    ("H100 with an older driver", "550.54.15", (9, 0), "cu128"),  # CUDA 13 needs driver >= 580
    ("V100", "580.65.06", (7, 0), "cu126"),  # CUDA 12.8 and 13 builds have no sm_70
    ("L40S", "535.104.05", (8, 9), "cu128"),  # sm_86 code runs on 8.9 (same major, minor >=)
    ("RTX PRO 6000 Blackwell", "570.86.10", (12, 0), "cu128"),
    ("A100 with an old driver", "470.82.01", (8, 0), None),  # CUDA 12 needs driver >= 525.60.13
]


def newest_that_runs(driver: str, capability, builds: list[dict]) -> str | None:
    """The first build (newest first) that runs under `driver` on `capability`, by the one rule."""
    cuda = gpu_rules.driver_cuda(driver)
    for build in builds:
        made_by = tuple(int(p) for p in build["cuda"].split("."))
        if gpu_rules.build_verdict(capability, build["arch_list"], made_by, cuda) == "runs":
            return build["tag"]
    return None


@exercise("00.3", "which PyTorch build runs on this GPU node?")
def check_pick_build(pick_build):
    for gpu, driver, capability, _ in NODES:
        want = newest_that_runs(driver, capability, WHEELHOUSE)
        wheelhouse = [dict(build) for build in WHEELHOUSE]  # an answer may not change ours
        got = call_answer(pick_build, driver, capability, wheelhouse)
        what = f"{gpu} (driver {driver}, compute capability {capability[0]}.{capability[1]})"
        expect(got == want, repr(want), repr(got), what)
    return "the newest build whose CUDA the driver runs and whose architectures include the GPU"


def verify_import_records(measured, python: str, measured_after: float = 0.0, own_pid=None) -> str:
    """The checks of 00.4 on records read back from disk; pure, so tests can give them records."""
    expect(
        isinstance(measured, dict) and isinstance(measured.get("samples"), list),
        "records as import_cost.records(...) makes them (a dict with 'samples')",
        type(measured).__name__,
    )
    expect(measured.get("module") == "torch", "imports of torch", repr(measured.get("module")))
    expect(
        measured.get("python") == python,
        f"this environment's interpreter {python!r}",
        repr(measured.get("python")),
    )
    expect(
        measured.get("measured_at", 0) >= measured_after,
        "records written by this run",
        "records from an earlier run (a file left on disk)",
    )
    samples = measured["samples"]
    states = [s.get("state") for s in samples]
    expect(
        states[:1] == ["cold"] and states.count("warm") >= 2,
        "one cold import first, then at least two warm ones",
        states,
    )
    cold = samples[0]
    hidden = "evicted_bytes" in cold and cold["evicted_bytes"] is None  # cache_hidden: reads tell
    expect(
        hidden or cold.get("evicted_bytes", 0) > 0,
        "the cold import after import_cost.evict(...) dropped cached pages of the package "
        "(Linux's posix_fadvise; on macOS nothing can be dropped)",
        f"{cold.get('evicted_bytes')!r} bytes dropped",
    )
    pids = [s.get("pid") for s in samples]
    expect(
        len(set(pids)) == len(pids) and (own_pid or os.getpid()) not in pids,
        "each import in a fresh process of its own (import_cost.sample)",
        "repeated or missing process ids",
    )
    fresh = [s["seconds"] for s in samples if isinstance(s.get("seconds"), (int, float))]
    slow_enough = len(fresh) == len(samples) and min(fresh) >= import_cost.FRESH_IMPORT_S
    expect(
        slow_enough,
        f"each import at least {import_cost.FRESH_IMPORT_S} s (a fresh Python "
        "reads the package; under that, torch was already imported in that process)",
        "a faster one" if fresh else "no seconds",
    )
    return f"fresh imports of torch, cold first, records in {probes.RECORDS}"


WARM_CLOSE = 3.0  # the learner's warm import against the checker's own: within this factor


def compare_cold_and_warm(measured: dict) -> str:
    """The cold import against the warm ones, by what each read from storage (the child's own
    /proc/self/io): a cold import reads back files whose pages were dropped, a warm one finds
    them in memory. Times alone cannot tell: a virtual machine's disk may sit in its host's
    cache, and other jobs importing torch on the node refill the cache as the cold one runs, so
    the comparison asks only that the cold import read more than a warm one. The warm import
    that read least counts: another job dropping the same pages (its own cold import, on a
    shared node or a grader running two lessons 00 side by side) can send one warm import to
    storage, which says nothing of the learner's run."""
    cold, warm = measured["samples"][0], measured["samples"][1:]
    read = cold.get("read_bytes", -1)
    if read < 0:  # the system does not count a process's reads (no /proc/self/io)
        return "times only (this system does not count reads)"
    least = min(s.get("read_bytes", 0) for s in warm)
    expect(
        read > least,
        "the cold import reading more from storage than the warm ones (its pages were dropped)",
        f"the cold one read {read:,} bytes, a warm one {least:,}: drop the pages right before "
        "the cold import, in a fresh process (import_cost.sample('cold'))",
    )
    return "the cold import read from storage, the warm ones from memory"


@exercise(
    "00.4",
    "measure what a job pays to import torch, cold and warm",
    allows=("opens or removes files", "starts processes"),
)
def check_import_cost(measure_import_cost):
    ran = run_probe(probes.run_import_cost, measure_import_cost)
    message = verify_import_records(ran["records"], sys.executable, ran["started"], ran["pid"])
    compare_cold_and_warm(ran["records"])
    own = import_cost.import_seconds()["seconds"]  # the checker's own warm import, here
    # the fastest warm import: one sent to storage by another job's eviction is not the run's
    warm = min(s["seconds"] for s in ran["records"]["samples"][1:])
    expect(
        own / WARM_CLOSE <= warm <= own * WARM_CLOSE,
        f"warm imports of about {own:.1f} s, as the check measured one here",
        f"{warm:.2f} s",
    )
    return message + "; cold against warm, measured on this machine in fresh processes"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("00.2", cases=4)
def held_out_pairing(rng, compatible):
    """Other releases: a table of the five visible answers fails them. Each case asks about a
    pair and a near miss, so an answer that says the same thing for every unknown pair fails."""
    minor, suffix = rng.randint(0, 30), rng.choice(["", "+cpu", "+cu126"])
    torch_v = f"2.{minor}.{rng.randint(0, 3)}{suffix}"
    for miss in (0, rng.choice([-2, -1, 1, 2, 16])):
        tv_v = f"0.{minor + 15 + miss}.{rng.randint(0, 3)}{suffix}"
        want = versions.torchvision_pairs(torch_v, tv_v)
        got = call_answer(compatible, torch_v, tv_v)
        if got is not want:
            raise CheckFailed(f"compatible({torch_v!r}, {tv_v!r}): expected {want}, got {got!r}")
