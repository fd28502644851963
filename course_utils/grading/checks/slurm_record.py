"""A learner's job as evidence: Slurm's record of it, held to the course the grade is for.

Where an exercise asks for a job, the learner submits it while they work through the lesson
and names it in their answer (the id `sbatch --parsable` printed). At grade time the judge
reads Slurm's accounting of that job (`accounting.job_records`, outside the learner's process,
with the rights of whoever grades: the course account's coordinator sees its learners' jobs
where PrivateData hides them) and holds it to the course (`Course`): submitted by the learner's
cluster login, on the course's account, within the course's window; then the exercise's checker
holds it to the task (its state, its shape, its runs, the batch script Slurm stored). A job
serves one exercise of one learner: naming it twice in one notebook earns nothing here, and
the grader refuses one named by two exercises or two learners (grader/claims.py).

Where no Slurm answers, or the answer names no job, an exercise that allows it is graded on the
local route at the judge's seed; the evidence line says which (`note`, in the gradebook).
"""

from __future__ import annotations

import getpass
import re
import shutil
from dataclasses import dataclass

from course_utils import accounting, witness
from course_utils.answer_jobs import AnswerJob
from course_utils.grading import CheckFailed, NotAttempted, exercises, expect

JOB_ID = re.compile(r"^\d+(_\d+)?$")  # 4217, or an array task 4217_3


@dataclass(frozen=True)
class Course:
    """What a learner's job must be to count: whose (the learner's cluster login), on which
    account and submitted when (ISO times, sacct's own format); `required`: a run exercise
    must name a job (the course ran on this cluster), rather than run locally."""

    login: str
    account: str | None = None
    since: str | None = None
    until: str | None = None
    required: bool = False

    def describe(self) -> str:
        window = f", submitted {self.since or '...'} to {self.until or '...'}"
        account = f", account {self.account}" if self.account else ""
        return f"login {self.login}{account}{window if self.since or self.until else ''}"


_COURSE: list[Course] = []  # set once by the judge that grades (course grade's options)
_CLAIMED: dict[str, str] = {}  # job id -> the exercise that named it, in this judge


def set_course(course: Course) -> None:
    _COURSE[:] = [course]
    _CLAIMED.clear()


def course() -> Course:
    """The course of this grade; where nobody set one (a notebook checked in its own kernel),
    the jobs of whoever runs the check."""
    return _COURSE[0] if _COURSE else Course(login=getpass.getuser())


def slurm_answers() -> bool:
    """Whether this machine can read Slurm's accounting (sacct is there)."""
    return shutil.which("sacct") is not None


def named_jobs(value, what: str) -> list[str]:
    """The job ids an answer names: a list of ids (ints or strings), as plain data."""
    if value is None:
        return []
    ids = value if type(value) in (list, tuple) else [value]
    found = [str(i).strip() for i in ids]
    bad = [i for i in found if not JOB_ID.match(i)]
    if bad:
        raise CheckFailed(
            f"{what}: expected job ids as sbatch --parsable prints them (4217, or 4217_3 for an "
            f"array task), got {bad[0]!r}"
        )
    return found


def needs_a_job(exercise_id: str, how: str) -> None:
    """Where the course ran on this cluster, a run exercise names its job: say how."""
    if course().required:
        raise NotAttempted(f"submit your job on the cluster first ({how}), and name its id")


def learner_job(job_id: str, exercise_id: str) -> accounting.JobRecord:
    """Slurm's record of `job_id`, once it is the learner's own job for the course, ended, named
    by one exercise only; CheckFailed saying why not (NotAttempted for a job still queued or
    running: it is not wrong, only not done)."""
    records = learner_jobs(job_id, exercise_id)
    if len(records) > 1:
        tasks = ", ".join(r.job_id for r in records)
        raise CheckFailed(
            f"job {job_id}: expected one job, got an array of {len(records)} tasks ({tasks}): "
            "name the job this exercise asks for"
        )
    return records[0]


def learner_jobs(job_id: str, exercise_id: str, claim: bool = True) -> list[accounting.JobRecord]:
    """Slurm's records of `job_id`: the job, or each task of an array named by its id, held to
    the course as `learner_job` holds one. `claim=False` reads them as data only (another
    exercise's evidence may be read so; the job stays that exercise's)."""
    what = f"job {job_id}"
    claimed = _CLAIMED.get(job_id)
    if claim and claimed is not None and claimed != exercise_id:
        raise CheckFailed(
            f"{what} is already the evidence of exercise {claimed}: a job serves one exercise"
        )
    records = accounting.job_records(job_id)
    mine = course()
    if not records:
        raise CheckFailed(
            f"{what}: expected Slurm's record of a job of yours, got none (no such job, or "
            f"another user's job, which Slurm does not show to {mine.login})"
        )
    for record in records:
        _held_to_course(record, mine, f"job {record.job_id}")
    queued = [r for r in records if r.state in accounting.ACTIVE]
    if queued:
        states = ", ".join(f"{r.job_id} {r.state}" for r in queued)
        raise NotAttempted(
            f"{what} has not ended yet ({states}): run this check again once it has "
            f"(squeue -j {job_id} shows it until then)"
        )
    if claim:
        _CLAIMED[job_id] = exercise_id
    return records


def _held_to_course(record: accounting.JobRecord, mine: Course, what: str) -> None:
    """The course's rules for a learner's job: their login, the course's account and window."""
    if record.user != mine.login:
        raise CheckFailed(
            f"{what}: expected a job submitted by {mine.login}, got one submitted by "
            f"{record.user}: a job counts for the learner who ran it"
        )
    if mine.account and record.account != mine.account:
        raise CheckFailed(
            f"{what}: expected a job on the course's account {mine.account}, got account "
            f"{record.account} (sbatch --account={mine.account})"
        )
    if (mine.since and record.submitted < mine.since) or (
        mine.until and record.submitted > mine.until
    ):
        raise CheckFailed(
            f"{what}: expected a job submitted during the course ({mine.since or '...'} to "
            f"{mine.until or '...'}), got one submitted {record.submitted}"
        )


def job_line(record: accounting.JobRecord):
    """The job's own line of sacct (its allocation), not one of its steps; None if missing."""
    return next((s for s in record.steps if not s.is_step), None)


def allocation(record: accounting.JobRecord) -> str:
    """'2 nodes x 2 tasks, 8 CPUs' from the job's own line and its largest step."""
    job = job_line(record)
    steps = [s for s in record.steps if s.is_step and s.job_id.split(".")[-1].isdigit()]
    tasks = max((s.tasks or 0 for s in steps), default=0)
    nodes = job.nodes if job else 0
    cpus = job.alloc_cpus if job else 0
    gpus = job.alloc_tres.get("gres/gpu") if job else None
    tasks = tasks or 1
    shape = f"{nodes} node{'s' * (nodes != 1)} x {tasks} task{'s' * (tasks != 1)}"
    gpu_text = f", {gpus} GPU{'s' * (gpus != '1')}" if gpus else ""
    return shape + f", {cpus} CPU{'s' * (cpus != 1)}" + gpu_text


def note(text: str) -> None:
    """The evidence the current check rests on, for the gradebook ("sacct 4217: ...", "local
    run at the judge's seed")."""
    exercises.note_evidence(text)


def sacct_evidence(record: accounting.JobRecord) -> str:
    runs = f", {len(record.runs)} runs" if len(record.runs) > 1 else ""
    stored = "script stored" if record.script else "no script stored"
    return f"sacct {record.job_id}: {allocation(record)}, {record.state}{runs}, {stored}"


def answer_job(job_id: str, exercise_id: str, job: AnswerJob, digest: str | None) -> tuple:
    """A job the learner names for `job` (answer_jobs): theirs for the course (`learner_job`),
    the lesson's script as Slurm stored it, COMPLETED, run on the function in the learner's cell
    now (`digest`: its digest on the job's command line and in its result). Returns the record
    and what the program left in the job's comment after the digest."""
    record = learner_job(job_id, exercise_id)
    what = f"job {job_id}"
    stored = (record.script or "").strip()
    expect(
        stored == job.script().strip(),
        f"the lesson's {job.script_name} as Slurm stored it",
        "another script" if stored else "no script stored",
        what,
    )
    expect(record.state == "COMPLETED", "a COMPLETED job", record.state, what)
    expect(
        digest is not None and f"--digest {digest}" in record.submit_line,
        f"a run of the {job.function} in your cell now (--digest {digest})",
        "a run of another version: write the job again, submit it, and name the new id",
        what,
    )
    result = witness.from_job_record(record.comment) or ""
    prefix = f"digest {digest} "
    expect(
        result.startswith(prefix),
        "the result the program left in the job's record",
        record.comment or "none (did the program finish?)",
        what,
    )
    return record, result[len(prefix) :]


# What a program that trains at a seed leaves in its job's record (witness.to_job_record):
# course_utils.jobs.ddp_exercise (05.3) and faulty_ddp (09.3).
SEEDED_SUM = re.compile(r"^seed (\d+) sum (-?[\d.]+)$")


def seeded_sum(record: accounting.JobRecord, left_by: str, none: str, what: str):
    """The seed and the parameter sum (as written) that `left_by` left in the job's record,
    once that seed is the --seed the job was submitted with; `none`: what to say without one."""
    found = SEEDED_SUM.match(witness.from_job_record(record.comment) or "")
    expect(
        found is not None and f"--seed {found[1]}" in record.submit_line,
        f"the parameter sum {left_by} left in the job's record, at the --seed it was given",
        record.comment or none,
        what,
    )
    return int(found[1]), found[2]
