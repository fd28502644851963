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
RAN = "2026-11-29T08:00:57|2026-11-29T08:01:06|cn1"  # Start, End, NodeList
OWNERS = (
    f"4217|learner1|course|2026-11-29T08:00:56|COMPLETED|{RAN}|course:seed 5 sum 1.5|sbatch "
    f"--parsable doctor.sh --seed 5\n4217.batch||course|2026-11-29T08:00:56|COMPLETED|{RAN}||\n"
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
        f"9|a|course|2026-11-29T08:00:00|REQUEUED|{RAN}||sbatch x\n"
        f"9|a|course|2026-11-29T08:00:00|COMPLETED|{RAN}|course:hash h|sbatch x\n"
    )
    assert [row["State"] for row in accounting.parse_owners(text)] == ["REQUEUED", "COMPLETED"]


def test_a_record_keeps_the_command_line_of_each_step_of_the_last_run(fake_commands, monkeypatch):
    monkeypatch.setattr(accounting, "SETTLE_WAIT", 0)
    owners = (
        f"9|a|course|2026-11-29T08:00:00|REQUEUED|{RAN}||sbatch ck.sh --seed 3\n"
        f"9.0|||2026-11-29T08:00:00|CANCELLED|{RAN}||srun python -m x --threads 2 --seed 3\n"
        f"9|a|course|2026-11-29T08:00:00|COMPLETED|{RAN}|course:hash h step 8|sbatch ck.sh "
        "--seed 3\n"
        f"9.batch||course|2026-11-29T08:00:00|COMPLETED|{RAN}||\n"
        f"9.0|||2026-11-29T08:00:00|COMPLETED|{RAN}||srun python -m x --threads 4 --seed 3\n"
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


# An array of two tasks, as the CI cluster's sacct gave it (one section of --batch-script per
# task), and the same array before its tasks started.
ARRAY_STEPS = "".join(
    f"49_{t}|a.sh|COMPLETED|0:0|00:00:01|1|2000M||00:00.042|billing=1,cpu=1,mem=2000M,node=1|1|\n"
    f"49_{t}.batch|batch|COMPLETED|0:0|00:00:01|1||1088K|00:00.038|cpu=1,mem=2000M,node=1|1|1\n"
    f"49_{t}.0|python|COMPLETED|0:0|00:00:01|1||824K|00:00.004|cpu=1,mem=2000M,node=1|1|1\n"
    for t in (0, 1)
)
ARRAY_OWNERS = "".join(
    f"49_{t}|learner1|course|2026-11-29T09:06:20|COMPLETED|2026-11-29T09:06:2{t}|"
    f"2026-11-29T09:06:3{t}|cn{t + 1}|course:task {t}|sbatch --parsable --array=0-1%2 a.sh\n"
    f"49_{t}.batch||course|2026-11-29T09:06:21|COMPLETED|2026-11-29T09:06:21|"
    f"2026-11-29T09:06:21|cn{t + 1}||\n"
    for t in (0, 1)
)
ARRAY_SCRIPTS = "".join(
    f"Batch Script for 49_{t}\n{'-' * 80}\n#!/bin/bash\nsrun python -m x --task {t}\n\n"
    for t in (0, 1)
)


def test_an_array_is_a_record_per_task_each_with_its_script_times_and_nodes(
    fake_commands, monkeypatch
):
    monkeypatch.setattr(accounting, "SETTLE_WAIT", 0)
    fake_commands(
        {
            "sacct --duplicates": ARRAY_OWNERS,
            "sacct --batch-script": ARRAY_SCRIPTS,
            "sacct -j": ARRAY_STEPS,
        }
    )
    first, second = accounting.job_records("49")
    assert (first.job_id, second.job_id) == ("49_0", "49_1")
    assert second.script == "#!/bin/bash\nsrun python -m x --task 1\n"
    assert (second.started, second.ended, second.nodelist) == (
        "2026-11-29T09:06:21",
        "2026-11-29T09:06:31",
        "cn2",
    )
    assert witness.from_job_record(second.comment) == "task 1"
    assert [s.job_id for s in second.steps] == ["49_1", "49_1.batch", "49_1.0"]
    assert accounting.job_record("49") is None  # two jobs under one id: name one
    slurm_record.set_course(slurm_record.Course("learner1"))
    assert [r.job_id for r in slurm_record.learner_jobs("49", "10.2")] == ["49_0", "49_1"]
    with pytest.raises(CheckFailed, match=r"job 49: expected one job, got an array of 2 tasks"):
        slurm_record.learner_job("49", "10.2")


def test_a_script_slurm_did_not_store_is_none():
    text = f"Batch Script for 7\n{'-' * 80}\nNONE\n"
    assert accounting.parse_batch_scripts(text) == {}
    assert accounting.parse_batch_script(text) is None


def test_a_job_still_queued_is_not_attempted_yet_not_failed(fake_commands, monkeypatch):
    monkeypatch.setattr(accounting, "SETTLE_WAIT", 0)
    steps = "57_[0-2%2]|a.sh|PENDING|0:0|00:00:00|0|2000M||00:00:00|||\n"
    owners = (
        "57_[0-2%2]|learner1|course|2026-11-29T09:06:54|PENDING|Unknown|Unknown|None assigned||"
        "sbatch --parsable --array=0-2%2 a.sh\n"
    )
    fake_commands({"sacct --duplicates": owners, "sacct --batch-script": "", "sacct -j": steps})
    (record,) = accounting.job_records("57")
    assert (record.state, record.started, record.nodelist) == ("PENDING", "", "")
    slurm_record.set_course(slurm_record.Course("learner1"))
    with pytest.raises(NotAttempted, match=r"job 57 has not ended yet \(57_\[0-2%2\] PENDING\)"):
        slurm_record.learner_jobs("57", "10.2")
    assert "57" not in slurm_record._CLAIMED  # named again once it ended, it still counts


def test_jobs_read_as_data_stay_the_evidence_of_the_exercise_that_named_them(sacct):
    slurm_record.set_course(slurm_record.Course("learner1"))
    slurm_record.learner_job("4217", "10.2")
    assert slurm_record.learner_jobs("4217", "10.4", claim=False)[0].job_id == "4217"
    with pytest.raises(CheckFailed, match="already the evidence of exercise 10.2"):
        slurm_record.learner_jobs("4217", "10.4")
