"""What a course program reports, as it happens, to whoever grades the run that started it.

Taught in lesson 06: the preempted and resumed training (`resumable.record`) reports each start,
stop and end here as well as in its history file. Where COURSE_WITNESS names a socket (a graded
check that started the program sets it), the report goes there; elsewhere nothing happens. The
judge takes a report only from a process it recognises from outside the learner's process (the
program the check expects, started by the learner's kernel, with an untouched environment), so a
report is a fact the learner's own code cannot make up: that a signal stopped the run, say.

In a Slurm job a program also leaves its result in the job's own record (`to_job_record`: the
job's comment, which sacct keeps with AccountingStoreFlags=job_comment): lessons 05, 06 and 09
grade a learner's job by reproducing that result at the seed the job was submitted with, and
lesson 10 reads each run of the learner's study from it (the judge trains the 1-rank runs' first
steps itself).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys

from course_utils import messages, processes

VARIABLE = "COURSE_WITNESS"
TIMEOUT = 5.0  # seconds to deliver one report; a judge that does not answer costs no more


def report(event: str, **fields) -> bool:
    """Send `event` with `fields` (plain JSON values) to the socket in COURSE_WITNESS, naming this
    program (its `-m` module); True when it was taken. Never raises: training goes on anyway."""
    path = os.environ.get(VARIABLE)
    if not path:
        return False
    program = getattr(sys.modules.get("__main__"), "__spec__", None)
    header = {"op": "witness", "program": getattr(program, "name", None), "event": event}
    with contextlib.suppress(OSError, ValueError, TypeError, ConnectionError):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(TIMEOUT)
            conn.connect(path)
            messages.send(conn, {**header, "fields": fields})
            reply, _ = messages.receive(conn)
            return reply.get("op") == "taken"
    return False


JOB_COMMENT = "course:"  # how a course program's result starts in a job's comment


def to_job_record(result: str, environ=None) -> bool:
    """In a Slurm job, set its comment to `result` (scontrol update; the owner may), so that
    sacct's record of the job holds it; True when Slurm took it. Nothing outside a job, nor in
    the course's emulated jobs (lesson 10's local ranks), which carry job ids of no real job."""
    environ = os.environ if environ is None else environ
    if not environ.get("SLURM_CLUSTER_NAME"):  # slurmd sets it; the course's emulations do not
        return False
    job = environ.get("SLURM_ARRAY_JOB_ID") and environ.get("SLURM_ARRAY_TASK_ID")
    job_id = f"{environ['SLURM_ARRAY_JOB_ID']}_{job}" if job else environ.get("SLURM_JOB_ID")
    if not job_id:
        return False
    comment = f"Comment={JOB_COMMENT}{result}"
    try:
        done = processes.run(["scontrol", "update", f"JobId={job_id}", comment], timeout=20)
    except OSError:  # no scontrol where the job runs
        return False
    return done.ok


def from_job_record(comment: str) -> str | None:
    """A course program's result in a job's comment as sacct prints it; None for any other."""
    return comment[len(JOB_COMMENT) :] if comment.startswith(JOB_COMMENT) else None
