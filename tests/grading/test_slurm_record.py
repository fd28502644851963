"""A learner's job as evidence (checks/slurm_record.py, grader/slurm_rules.py, grader/claims.py,
accounting.job_record): Slurm's answers, as the CI cluster gave them, are canned here; the real
class of two learners and an instructor is graded in tests/integration/test_grader_class.py."""

import argparse

import pytest

from course_utils import accounting, witness
from course_utils.grading import CheckFailed, NotAttempted
from course_utils.grading.checks import slurm_record
from course_utils.grading.grader.claims import refuse_shared_jobs
from course_utils.grading.grader.gradebook import ExerciseGrade, SubmissionGrade
from course_utils.grading.grader.slurm_rules import SlurmRules

STEPS = (
    "4217|doctor|COMPLETED|0:0|00:00:09|7|5600M||00:02.1|billing=7,cpu=7,gres/gpu=1,mem=5600M,"
    "node=1|1|\n4217.batch|batch|COMPLETED|0:0|00:00:09|7||210M|00:02.1|cpu=7,gres/gpu=1,"
    "mem=5600M,node=1|1|1\n"
)
OWNERS = (
    "4217|learner1|course|2026-11-29T08:00:56|COMPLETED|course:seed 5 sum 1.5|sbatch --parsable "
    "doctor.sh --seed 5\n4217.batch||course|2026-11-29T08:00:56|COMPLETED||\n"
)
SCRIPT = "Batch Script for 4217\n" + "-" * 80 + "\n#!/bin/bash\n#SBATCH --time=10\ncourse doctor\n"


@pytest.fixture
def sacct(fake_commands, monkeypatch):
    monkeypatch.setattr(accounting, "SETTLE_WAIT", 0)
    return fake_commands(
        {"sacct --duplicates": OWNERS, "sacct --batch-script": SCRIPT, "sacct -j": STEPS}
    )


@pytest.fixture(autouse=True)
def a_course():
    yield
    slurm_record._COURSE.clear()
    slurm_record._CLAIMED.clear()


def test_a_record_holds_who_when_the_script_and_the_result(sacct):
    record = accounting.job_record("4217")
    assert (record.user, record.account, record.submitted) == (
        "learner1",
        "course",
        "2026-11-29T08:00:56",
    )
    assert record.runs == ("COMPLETED",) and record.state == "COMPLETED"
    assert record.script == "#!/bin/bash\n#SBATCH --time=10\ncourse doctor\n"
    assert witness.from_job_record(record.comment) == "seed 5 sum 1.5"
    assert record.submit_line.endswith("--seed 5")
    assert slurm_record.sacct_evidence(record) == (
        "sacct 4217: 1 node x 1 task, 7 CPUs, 1 GPU, COMPLETED, script stored"
    )


def test_a_requeued_job_shows_each_run():
    text = (
        "9|a|course|2026-11-29T08:00:00|REQUEUED||sbatch x\n"
        "9|a|course|2026-11-29T08:00:00|COMPLETED|course:hash h|sbatch x\n"
    )
    assert [row["State"] for row in accounting.parse_owners(text)] == ["REQUEUED", "COMPLETED"]


def test_a_record_keeps_the_command_line_of_each_step_of_the_last_run(fake_commands, monkeypatch):
    monkeypatch.setattr(accounting, "SETTLE_WAIT", 0)
    owners = (
        "9|a|course|2026-11-29T08:00:00|REQUEUED||sbatch ck.sh --seed 3\n"
        "9.0|||2026-11-29T08:00:00|CANCELLED||srun python -m x --threads 2 --seed 3\n"
        "9|a|course|2026-11-29T08:00:00|COMPLETED|course:hash h step 8|sbatch ck.sh --seed 3\n"
        "9.batch||course|2026-11-29T08:00:00|COMPLETED||\n"
        "9.0|||2026-11-29T08:00:00|COMPLETED||srun python -m x --threads 4 --seed 3\n"
    )
    fake_commands({"sacct --duplicates": owners, "sacct --batch-script": "", "sacct -j": STEPS})
    record = accounting.job_record("9")
    assert record.runs == ("REQUEUED", "COMPLETED")
    assert record.step_lines == ("", "srun python -m x --threads 4 --seed 3")


def test_the_learners_own_job_in_the_course_counts(sacct):
    slurm_record.set_course(slurm_record.Course("learner1", "course", since="2026-11-01T00:00:00"))
    assert slurm_record.learner_job("4217", "00.1").job_id == "4217"


@pytest.mark.parametrize(
    ("course", "said"),
    [
        (
            slurm_record.Course("learner2"),
            "expected a job submitted by learner2, got one submitted",
        ),
        (
            slurm_record.Course("learner1", "physics"),
            "on the course's account physics, got account",
        ),
        (
            slurm_record.Course("learner1", since="2026-11-29T09:00:00"),
            "submitted during the course (2026-11-29T09:00:00 to ...), got one submitted 2026-11",
        ),
        (
            slurm_record.Course("learner1", until="2026-11-28T00:00:00"),
            "during the course (... to 2026-11-28T00:00:00)",
        ),
    ],
)
def test_another_learners_job_or_one_outside_the_course_is_refused(sacct, course, said):
    slurm_record.set_course(course)
    with pytest.raises(CheckFailed, match=said.replace("(", r"\(").replace(")", r"\)")):
        slurm_record.learner_job("4217", "00.1")


def test_a_job_serves_one_exercise(sacct):
    slurm_record.set_course(slurm_record.Course("learner1"))
    slurm_record.learner_job("4217", "00.1")
    slurm_record.learner_job("4217", "00.1")  # the same exercise may read it again
    with pytest.raises(CheckFailed, match="already the evidence of exercise 00.1"):
        slurm_record.learner_job("4217", "09.3")


def test_a_job_slurm_does_not_show_is_refused(fake_commands, monkeypatch):
    monkeypatch.setattr(accounting, "SETTLE_WAIT", 0)
    fake_commands({"sacct": ""})  # PrivateData: another user's job is not there at all
    with pytest.raises(CheckFailed, match="got none .no such job, or another user's job"):
        slurm_record.learner_job("4217", "00.1")


def test_named_jobs_are_ids_as_sbatch_prints_them():
    assert slurm_record.named_jobs([4217, "4218_3"], "JOBS") == ["4217", "4218_3"]
    assert slurm_record.named_jobs(None, "JOBS") == slurm_record.named_jobs([], "JOBS") == []
    with pytest.raises(CheckFailed, match="JOBS: expected job ids .* got 'Submitted batch job"):
        slurm_record.named_jobs(["Submitted batch job 4217"], "JOBS")


def test_where_the_course_ran_on_the_cluster_a_run_names_its_job():
    slurm_record.needs_a_job("00.1", "sbatch it")  # nobody said so: the local route is fine
    slurm_record.set_course(slurm_record.Course("learner1", "course", required=True))
    with pytest.raises(NotAttempted, match=r"submit your job on the cluster first \(sbatch it\)"):
        slurm_record.needs_a_job("00.1", "sbatch it")


def _args(**given):
    defaults = {"account": None, "since": None, "until": None, "logins": None}
    return argparse.Namespace(**{**defaults, **given})


def test_course_grade_s_options_become_the_judge_s(tmp_path):
    logins = tmp_path / "logins.csv"
    logins.write_text("learner,login\nalice,a.smith\n")
    rules = SlurmRules.from_args(_args(account="course", since="2026-11-01", logins=str(logins)))
    assert rules.judge_options("alice") == [
        "--login",
        "a.smith",
        "--account",
        "course",
        "--since",
        "2026-11-01T00:00:00",
        "--jobs-required",
    ]
    assert (
        rules.describe("bob") == "login bob, account course, submitted 2026-11-01T00:00:00 to ..."
    )


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"since": "1 Nov"}, "--since '1 Nov': give a date or time as sacct prints them"),
        ({"since": "2026-11-02", "until": "2026-11-01"}, "is before --since"),
        ({"logins": "/nonexistent.csv"}, "--logins /nonexistent.csv: cannot be read"),
    ],
)
def test_bad_options_name_the_value_the_rule_and_the_fix(given, said):
    with pytest.raises(ValueError, match=said):
        SlurmRules.from_args(_args(**given))


def _grade(learner, ex_id, evidence):
    grade = SubmissionGrade(learner, ex_id[:2], "x.ipynb")
    grade.exercises = [ExerciseGrade(ex_id, "t", 1, "passed", "fine", evidence=evidence)]
    return grade


def test_a_job_named_by_two_exercises_earns_neither():
    grades = [
        _grade("alice", "05.3", "sacct 4217: 2 nodes x 2 tasks, COMPLETED, script stored"),
        _grade("alice", "09.3", "sacct 4217: 1 node x 2 tasks, COMPLETED, script stored"),
        _grade("bob", "00.1", "sacct 5000: 1 node x 1 task, COMPLETED, script stored"),
    ]
    found = {g.exercises[0].exercise_id: g.exercises[0] for g in refuse_shared_jobs(grades)}
    assert found["05.3"].verdict == found["09.3"].verdict == "failed"
    assert found["05.3"].message == (
        "job 4217 is named by alice's 09.3 too: a job serves one exercise of one learner"
    )
    assert found["00.1"].verdict == "passed"
