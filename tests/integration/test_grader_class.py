"""A class graded on the scheduler's record: two learners ran their jobs as themselves on the CI
cluster, and the instructor, the course account's coordinator, grades their notebooks (not as
root), locally and as a job array.

The cluster (.ci/slurm-cluster.sh) hides each user's jobs from the others (PrivateData=jobs),
keeps every batch script and comment, and has the Unix users learner1, learner2 and instructor
and the account `course`. learner1 submits the doctor job of 00.1 and the repaired script of 09.3
the way the lessons say (`sbatch --parsable`), with 05.3's DDP job on 2 nodes and 06.4's job,
requeued by the signal learner1 sends it, 02.2's thread sweep and 08.3's profiled training (their
function as the job's answer), and lesson 10's staging job and study (the four shapes one after
another, the sweep an array of 2 tasks), as the lessons write them, and names them in their
notebooks; learner2 names learner1's doctor job, 08.3 job and lesson 10 jobs, and for 09.3 a job
of theirs that ran another script. Three more submissions, graded as learner2 (--logins), name
a doctor job submitted before the course's window, one that failed, and one that asked for too
few CPUs. Each earns 0 with the reason; the honest learner earns every Slurm-graded point, the
gradebook naming each job.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat
import pytest
from needs import in_ci

from course_utils import answer_jobs
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.bwrap, pytest.mark.slow]

LEARNERS, INSTRUCTOR, ACCOUNT = ("learner1", "learner2"), "instructor", "course"
PYTHON = Path(sys.prefix) / "bin" / "python"  # the course's environment, shared with the class
DOCTOR = """#!/bin/bash
#SBATCH --job-name=doctor
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task={cpus}
#SBATCH --mem-per-cpu=800
#SBATCH --time=00:10:00
source {venv}/bin/activate
course doctor{fail}
"""
REPAIRED = """#!/bin/bash
#SBATCH --job-name=ddp-repaired
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --time=00:05:00
set -euo pipefail
# COURSE_DIR: the course's folder (batch.submit sets it; else submit from there)
source "${COURSE_DIR:-.}/slurm/config.sh"
course_activate
course_master
srun python -m course_utils.jobs.faulty_ddp --timeout 20 "$@"
"""


def _as(user: str, *command, cwd=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["runuser", "-u", user, "--", *map(str, command)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _why_no_class() -> str | None:
    if os.geteuid() != 0 or not shutil.which("runuser"):
        return "needs root and runuser to act as the class's users"
    for user in (*LEARNERS, INSTRUCTOR):
        try:
            pwd.getpwnam(user)
        except KeyError:
            return f"no user {user}: .ci/slurm-cluster.sh start adds the class"
    if _as(INSTRUCTOR, PYTHON, "-c", "import course_utils").returncode != 0:
        return (
            f"the class's users cannot run {PYTHON}: .ci/slurm-cluster.sh share "
            f"{sys.base_prefix} {REPO_ROOT}"
        )
    return None


@pytest.fixture(scope="module")
def home():
    """A folder each of the class can reach: the learners' job folders, the submissions (the
    instructor reads them) and the grading output (the instructor writes it). Not under
    pytest's own temporary folder: every pytest session of root's (the other test lane's, a
    graded run's) takes its permissions back to root's alone."""
    why = _why_no_class()
    if why:
        pytest.fail(why) if in_ci() else pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="course-class-"))
    root.chmod(0o755)
    for user in (*LEARNERS, INSTRUCTOR):
        (root / user).mkdir()
        shutil.chown(root / user, user, user)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def submit(user: str, home: Path, name: str, script: str, *args) -> str:
    path = home / user / f"{name}.sh"
    path.write_text(script)
    return submit_line(user, home, f"--output={home / user}/{name}-%j.out", path, *args)


def wait_for(*jobs: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["squeue", "-h", "-j", ",".join(jobs), "-o", "%i"], capture_output=True, text=True
        ).stdout
        if not out.strip():
            return
        time.sleep(2)
    pytest.fail(f"jobs {jobs} still queued or running after {timeout:g} s")


def ddp_job(home: Path) -> str:
    """05.3's CPU_JOB as the lesson writes it for learner1 (ddp_jobs.write_job): the header, the
    commands of slurm/ddp_srun.sh, the solution's train_ddp as the module the ranks load."""
    from lesson05_answers import ddp_header

    from course_utils import ddp_jobs

    nb = nbformat.read(REPO_ROOT / "solutions" / "05_distributed_data_parallel.ipynb", 4)
    cell = next(c for c in nb.cells if "def train_ddp" in c.source)
    answer = home / "learner1" / "train_ddp_yours.py"
    answer.write_text(
        "import torch\nfrom torch.utils.data import DistributedSampler\n" + cell.source
    )
    script = ddp_jobs.job_script(ddp_header(ddp_jobs.CPU_JOB.as_dict()))
    program = ["-m", "course_utils.jobs.ddp_exercise", "--answer", answer, "--seed", 9]
    return submit("learner1", home, "ddp", script, *program)


def preempted_job(home: Path) -> str:
    """06.4's job: slurm/checkpoint_requeue.sh, sent USR1 by learner1 once it trains."""
    job = submit(
        "learner1", home, "ckpt", (REPO_ROOT / "slurm" / "checkpoint_requeue.sh").read_text(),
        "--seed", 11, "--max-steps", 16, "--epochs", 3, "--save-every", 3, "--step-delay", 0.3,
    )  # fmt: skip
    out = home / "learner1" / f"ckpt-{job}.out"
    deadline = time.monotonic() + 120
    while "step 4 " not in (out.read_text() if out.exists() else ""):
        assert time.monotonic() < deadline, f"job {job} never reached step 4"
        time.sleep(0.5)
    done = _as("learner1", "scancel", "--signal=USR1", "--batch", job)
    assert done.returncode == 0, done.stderr
    return job


def lab_jobs(home: Path) -> dict[str, list[str]]:
    """Lesson 10's jobs as learner1 submits them: the files the lesson's cells write for the
    solution's stage_dataset and scaling_script (lab.your_jobs), each sbatch line run as
    learner1, the shapes one after another; the sweep of 2 learning rates, every run 4 steps
    after the warm-up (the 5 first losses the judge trains), one CPU per task (the cluster's
    nodes share 2 cores). {"STAGING_JOBS": [id], "STUDY_JOBS": [the shapes' ids, the array's]}."""
    from lab_answers import load

    from course_utils.lab import small_files, your_jobs

    mine = home / "learner1"
    runs = mine / "runs" / "10"
    small_files.write_dataset(runs / "data")  # the lab's data set, as the lesson's first cell
    answers = load(runs)
    staging = your_jobs.staging_job(answers.stage_dataset, runs)
    study = your_jobs.study_jobs(answers.scaling_script, runs, lrs=(0.02, 0.1), environ={})
    for path in [runs, *runs.rglob("*")]:
        shutil.chown(path, "learner1", "learner1")  # the jobs write their records and logs there
    ids: dict[str, str] = {}
    for job in (*staging.submissions, *study.submissions):
        argv = job.argv(ids.get(job.after))
        if "--steps" in argv:
            argv[argv.index("--steps") + 1] = "4"
        ids[job.name] = submit_line("learner1", home, "--cpus-per-task=1", *argv[2:])
    return {
        "STAGING_JOBS": [ids["staging"]],
        "STUDY_JOBS": [ids[name] for name in ("1x1", "1x2", "1x4", "2x2", "sweep")],
    }


# What each lesson's exercise cell uses from the notebook's first cell.
ANSWER_IMPORTS = {
    "02": "from course_utils import cpu_sweep, hpc\nfrom course_utils.timing import time_fn\n",
    "08": "from course_utils import profiling\n",
}


def answer_job(home: Path, lesson: str, job) -> str:
    """02.2's or 08.3's job as the lesson writes it for learner1 (answer_jobs.write): the
    solution's exercise cell whole as a module (so that the function's source, and its digest,
    are the kernel's), its sbatch line run as learner1."""
    nb = nbformat.read(next((REPO_ROOT / "solutions").glob(f"{lesson}_*.ipynb")), as_version=4)
    cell = next(c.source for c in nb.cells if course_meta(c).get("exercise") == job.exercise
                and course_meta(c).get("role") == "exercise")  # fmt: skip
    mine = home / "learner1"
    module = mine / f"answers_{lesson}.py"
    module.write_text(ANSWER_IMPORTS[lesson] + "\n\n" + cell + "\n")
    spec = importlib.util.spec_from_file_location(f"answers_{lesson}", module)
    answers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(answers)
    line = answer_jobs.write(job, getattr(answers, job.function), mine / f"job{lesson}")
    words = [w for w in shlex.split(line)[2:] if not w.startswith("--export=")]
    return submit_line("learner1", home, *words)


def submit_line(user: str, home: Path, *words) -> str:
    """`sbatch --parsable` with these options, script and arguments, run as `user` from their
    folder on the course's account."""
    done = _as(
        user,
        "sbatch",
        "--parsable",
        f"--account={ACCOUNT}",
        f"--export=ALL,COURSE_DIR={REPO_ROOT}",
        *words,
        cwd=home / user,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def _submission(lesson: str, named: dict[str, list[str]]) -> nbformat.NotebookNode:
    """The solution of `lesson`, its exercise cells naming these jobs ({"DDP_JOBS": [id]})."""
    nb = nbformat.read(next((REPO_ROOT / "solutions").glob(f"{lesson}_*.ipynb")), as_version=4)
    for names, ids in named.items():
        cell = next(c for c in nb.cells if f"{names} = []" in c.source)
        cell.source = cell.source.replace(f"{names} = []", f"{names} = {ids!r}")
    return nb


@pytest.fixture(scope="module")
def the_class(home):
    """The jobs the class ran, and the window of the course; the submissions written."""
    venv = sys.prefix
    early = submit("learner2", home, "early", DOCTOR.format(cpus=7, venv=venv, fail=""))
    wait_for(early)
    time.sleep(1.5)  # sacct's times are whole seconds: the window starts after the early job
    since = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    jobs = {
        "doctor": submit("learner1", home, "doctor", DOCTOR.format(cpus=7, venv=venv, fail="")),
        "repaired": submit("learner1", home, "repaired", REPAIRED, "--seed", 7),
        "other": submit("learner2", home, "other", REPAIRED + "# a line of my own\n", "--seed", 3),
        "failed": submit(
            "learner2", home, "failed", DOCTOR.format(cpus=7, venv=venv, fail="\nexit 3")
        ),
        "narrow": submit("learner2", home, "narrow", DOCTOR.format(cpus=1, venv=venv, fail="")),
        "ddp": ddp_job(home),
        "preempted": preempted_job(home),
        "threads": answer_job(home, "02", answer_jobs.THREAD_SWEEP),
        "bottleneck": answer_job(home, "08", answer_jobs.BOTTLENECK),
    }
    lab = lab_jobs(home)
    wait_for(*jobs.values(), *lab["STAGING_JOBS"], *lab["STUDY_JOBS"])
    subs = home / "submissions"
    subs.mkdir()
    written = {
        "learner1__00": _submission("00", {"DOCTOR_JOBS": [jobs["doctor"]]}),
        "learner1__09": _submission("09", {"REPAIRED_JOBS": [jobs["repaired"]]}),
        "learner1__05": _submission("05", {"DDP_JOBS": [jobs["ddp"]]}),
        "learner1__06": _submission("06", {"PREEMPTED_JOBS": [jobs["preempted"]]}),
        "learner1__10": _submission("10", lab),
        "learner1__02": _submission("02", {"THREAD_JOBS": [jobs["threads"]]}),
        "learner1__08": _submission("08", {"BOTTLENECK_JOBS": [jobs["bottleneck"]]}),
        "learner2__08": _submission("08", {"BOTTLENECK_JOBS": [jobs["bottleneck"]]}),  # learner1's
        "learner2__00": _submission("00", {"DOCTOR_JOBS": [jobs["doctor"]]}),  # learner1's
        "learner2__09": _submission("09", {"REPAIRED_JOBS": [jobs["other"]]}),
        "learner2__10": _submission("10", lab),  # learner1's
        "early__00": _submission("00", {"DOCTOR_JOBS": [early]}),
        "failed__00": _submission("00", {"DOCTOR_JOBS": [jobs["failed"]]}),
        "narrow__00": _submission("00", {"DOCTOR_JOBS": [jobs["narrow"]]}),
    }
    for name, nb in written.items():
        stem = next((REPO_ROOT / "solutions").glob(f"{name[-2:]}_*.ipynb")).name
        nbformat.write(nb, subs / f"{name[:-4]}__{stem}")
    (home / "logins.csv").write_text("learner,login\nearly,learner2\nfailed,learner2\n"
                                     "narrow,learner2\n")  # fmt: skip
    return {**jobs, **lab, "early": early, "since": since}


def grade(home: Path, the_class: dict, out: str, *extra: str) -> dict:
    """The instructor's `course grade`: {(learner, lesson): gradebook row}."""
    folder = home / INSTRUCTOR / out
    command = [
        Path(sys.prefix) / "bin" / "course", "grade", home / "submissions", "--out", folder,
        "--seed", "3", "--account", ACCOUNT, "--since", the_class["since"],
        "--logins", home / "logins.csv", "--timeout", "400", "--cell-timeout", "200", *extra,
    ]  # fmt: skip
    done = _as(INSTRUCTOR, *command, cwd=REPO_ROOT, timeout=1500)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with open(folder / "gradebook.csv") as f:
        return {(r["learner"], r["lesson"]): r for r in csv.DictReader(f)}


def feedback(home: Path, out: str, learner: str) -> str:
    return (home / INSTRUCTOR / out / "feedback" / f"{learner}.md").read_text()


@pytest.fixture(scope="module")
def graded(home, the_class):
    return grade(home, the_class, "local", "-j", "2")


def test_the_honest_learner_earns_every_point_on_slurm_s_record(graded, home, the_class):
    doctor, repaired = graded["learner1", "00"], graded["learner1", "09"]
    assert doctor["00.1"] == "1" and repaired["09.3"] == "1"
    ddp, preempted = graded["learner1", "05"], graded["learner1", "06"]
    assert ddp["05.3"] == preempted["06.4"] == "1"
    assert f"05.3: sacct {the_class['ddp']}: 2 nodes x 4 tasks" in ddp["evidence"]
    assert f"06.4: sacct {the_class['preempted']}: " in preempted["evidence"]
    assert ", 2 runs, script stored, its result reproduced" in preempted["evidence"]
    for row in (doctor, repaired, ddp, preempted):
        assert row["total"] == row["max"], feedback(home, "local", "learner1")
    assert (
        f"00.1: sacct {the_class['doctor']}: 1 node x 1 task, 7 CPUs, 1 GPU, COMPLETED, "
        in (doctor["evidence"])
    )
    assert f"09.3: sacct {the_class['repaired']}: " in repaired["evidence"]
    assert "its result reproduced" in repaired["evidence"]
    assert (
        doctor["slurm"] == f"login learner1, account course, submitted {the_class['since']} to ..."
    )


def test_the_honest_learner_s_function_jobs_earn_02_2_and_08_3(graded, home, the_class):
    threads, bottleneck = graded["learner1", "02"], graded["learner1", "08"]
    said = feedback(home, "local", "learner1")
    assert threads["02.2"] == bottleneck["08.3"] == "1", said
    assert f"02.2: sacct {the_class['threads']}: 1 node x 1 task, 2 CPUs" in threads["evidence"]
    assert ", rates at [1, 2] thread(s); and your thread_rates run by" in threads["evidence"]
    assert f"08.3: sacct {the_class['bottleneck']}: " in bottleneck["evidence"]
    assert ", both jobs named right" in bottleneck["evidence"]


def test_at_least_eight_exercises_rest_on_slurm_s_record(graded):
    """The honest learner's points on the scheduler's record: each exercise whose evidence
    names a job of theirs in sacct."""
    on_record = {
        found[1]
        for (learner, _), row in graded.items()
        if learner == "learner1"
        for part in row["evidence"].split("; ")
        if (found := re.match(r"^(\d\d\.\d): sacct \d", part)) and row[found[1]] == "1"
    }
    assert len(on_record) >= 8, sorted(on_record)


def test_the_honest_learner_s_lab_jobs_earn_lesson_10_on_slurm_s_record(graded, the_class):
    lab = graded["learner1", "10"]
    assert (lab["total"], lab["max"], lab["status"]) == ("4", "4", "ok"), lab
    (staging,), (shape1, *_, sweep) = the_class["STAGING_JOBS"], the_class["STUDY_JOBS"]
    assert f"10.1: sacct {staging}: 2 nodes x 4 tasks" in lab["evidence"]
    assert f"sacct {shape1}: 1 node x 1 task" in lab["evidence"]
    assert f"sacct {sweep}_1: 1 node x 1 task" in lab["evidence"]  # the array's second task
    assert "10.4: your study's jobs as data, read from sacct" in lab["evidence"]


@pytest.mark.parametrize(
    ("learner", "lesson", "said"),
    [
        ("learner2", "00", "expected a job submitted by learner2, got one submitted by learner1"),
        ("learner2", "09", "expected your repaired script, as Slurm stored it, got another"),
        ("early", "00", "expected a job submitted during the course"),
        ("failed", "00", "COMPLETED in sacct, got FAILED"),
        ("narrow", "00", "expected at least 7 CPUs"),
        ("learner2", "08", "expected a job submitted by learner2, got one submitted by learner1"),
    ],
)
def test_a_job_that_is_not_the_learner_s_own_answer_earns_nothing(
    graded, home, learner, lesson, said
):
    row = graded[learner, lesson]
    exercise = {"00": "00.1", "08": "08.3", "09": "09.3"}[lesson]
    assert row[exercise] == "0"
    assert said in feedback(home, "local", learner)


def test_another_learner_s_lab_jobs_earn_nothing(graded, home, the_class):
    """learner2 names learner1's staging job and study: 10.1 and 10.2 fail on whose jobs they
    are, and 10.4, which decides on them, on the same; 10.3 decides on logs, theirs to earn."""
    row, said = graded["learner2", "10"], feedback(home, "local", "learner2")
    assert (row["10.1"], row["10.2"], row["10.3"], row["10.4"]) == ("0", "0", "1", "0"), row
    staging, first = the_class["STAGING_JOBS"][0], the_class["STUDY_JOBS"][0]
    for job in (staging, first):
        assert (
            f"job {job}: expected a job submitted by learner2, got one submitted by learner1"
            in (said)
        )


def test_the_array_grades_as_the_instructor_here_does(graded, home, the_class):
    sbatch = ["--sbatch", "--cpus-per-task=2", "--mem=8G", "--time=00:20:00"]
    array = grade(home, the_class, "array", "--lesson", "00", "--slurm", "--tasks", "2", *sbatch)
    for key, row in array.items():
        assert (row["00.1"], row["evidence"]) == (graded[key]["00.1"], graded[key]["evidence"])
