"""Lesson 00's probes: the learner's job and measurement, run in the learner's process.

00.1: their script for this machine (its default partition, the line that activates this
Python's environment), run as a job by their own function; what `batch` gave back. 00.4: their
measurement of fresh imports of torch; the records their run wrote. The judge reads both itself
(checks/lesson00.py): the doctor's report in the job's output, sacct's record, the records.
"""

import os
import shutil
import sys
import time
from pathlib import Path

from course_utils import batch, import_cost, processes
from course_utils.grading import NotAttempted, probe

JOB_FOLDER = "runs/00"  # beside the notebook, as every file a lesson writes
RECORDS = "runs/import_cost.json"  # beside the notebook, as every file a lesson writes


def this_machine() -> dict:
    """Where the learner's job runs: the course's partition (COURSE_PARTITION, in slurm/config.sh
    or the environment: a GPU partition, since the job asks for a GPU), else this cluster's
    default partition (or none here), and the line that activates this Python's environment."""
    partition = batch.site_partition() or "debug"
    if not batch.site_partition() and shutil.which("sinfo"):
        done = processes.run(["sinfo", "-h", "-o", "%P"], timeout=20)
        defaults = [p for p in done.stdout.split() if p.endswith("*")] if done.ok else []
        partition = defaults[0].rstrip("*") if defaults else partition
    activate = Path(sys.prefix) / "bin" / "activate"
    setup = f"source {activate}" if activate.exists() else f"export PATH={sys.prefix}/bin:$PATH"
    return {"partition": partition, "setup": setup}


@probe("00.1")
def run_the_job(doctor_job, run_doctor_job):
    """In the learner's process: their script for this machine, run as a job by their function."""
    here = this_machine()
    script = doctor_job(here["partition"], here["setup"])
    folder = Path(JOB_FOLDER)
    folder.mkdir(parents=True, exist_ok=True)
    job = run_doctor_job(script, folder)
    if job is None:
        raise NotAttempted("run your job first: run_doctor_job must return what batch gave it")
    if not isinstance(job, batch.Job):
        return {"kind": type(job).__name__}
    return {
        "kind": "Job",
        "launcher": job.launcher,
        "job_id": job.job_id,
        "state": job.state,
        "returncode": job.returncode,
        "output": job.output[-8000:],
        "script": script,
        **here,
    }


@probe("00.4")
def run_import_cost(measure_import_cost):
    """In the learner's process: their measurement, then the records their run wrote."""
    started = time.time()
    Path(RECORDS).parent.mkdir(parents=True, exist_ok=True)
    Path(RECORDS).unlink(missing_ok=True)
    measure_import_cost(RECORDS)
    if not Path(RECORDS).exists():
        raise NotAttempted(f"run your measurement first: it saves no records to {RECORDS}")
    return {"started": started, "records": import_cost.load(RECORDS), "pid": os.getpid()}
