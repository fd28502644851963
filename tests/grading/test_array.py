"""grader/array: the job array's command line, the options it refuses, and how each task ended,
read from what Slurm and the task left (Slurm's answers as the CI cluster gave them; no process
is started: `processes.run` is answered here)."""

import json
import re
from pathlib import Path

import pytest

from course_utils import processes
from course_utils.grading.grader import array
from course_utils.grading.grader.gradebook import SubmissionGrade
from course_utils.grading.grader.results import Store
from course_utils.grading.grader.submissions import Submission


def test_the_sbatch_command_sets_the_array_and_passes_the_instructor_s_options_last():
    run = Path("/work/out/slurm/run-1")
    cmd = array.sbatch_command(Path("/c/slurm/grade_array.sh"), run, 3, ["--partition=cpu"])
    assert cmd == [
        "sbatch",
        "--parsable",
        "--array=0-2",
        "--job-name=course-grade",
        "--output=/work/out/slurm/run-1/task-%a.out",
        "--partition=cpu",
        "/c/slurm/grade_array.sh",
        "/work/out/slurm/run-1/manifest.json",
    ]


@pytest.mark.parametrize(
    "options, says",
    [
        (["--array=0-9"], "sbatch option '--array=0-9': `course grade --slurm` sets --array"),
        (["-o", "x.out"], "sbatch option '-o': `course grade --slurm` sets --output itself"),
        (["--wait"], "sets --wait itself"),
        (["partition=cpu"], "--sbatch 'partition=cpu': not an sbatch option"),
    ],
)
def test_options_the_array_sets_itself_are_refused_with_the_fix(options, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        array.check_sbatch_options(options)
    array.check_sbatch_options(["--partition=cpu", "-c", "4", "--time=01:00:00"])  # these pass


def answer(monkeypatch, replies):
    """Make `processes.run` answer as Slurm's commands would: replies[command] -> Finished."""
    calls = []

    def run(command, *, timeout, **kwargs):
        calls.append(list(command))
        out, err, code = replies[command[0]]
        return processes.Finished(tuple(command), code, out, err, 0.01)

    monkeypatch.setattr(processes, "run", run)
    return calls


def test_submit_returns_the_job_id_or_sbatch_s_own_refusal(monkeypatch):
    monkeypatch.setattr(array.shutil, "which", lambda name: f"/usr/bin/{name}")
    answer(monkeypatch, {"sbatch": ("81\n", "", 0)})
    assert array.submit(["sbatch", "x.sh"]) == "81"
    answer(monkeypatch, {"sbatch": ("", "sbatch: error: invalid partition specified: gpu", 1)})
    with pytest.raises(RuntimeError, match="sbatch refused the job array: sbatch: error: inv"):
        array.submit(["sbatch", "x.sh"])
    monkeypatch.setattr(array.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="sbatch is not on PATH: run `course grade --slurm`"):
        array.submit(["sbatch", "x.sh"])


def test_squeue_and_scontrol_answers_are_read_per_task():
    assert array.parse_squeue("2|RUNNING\n1|PENDING\n0|RUNNING\n") == {
        0: "RUNNING",
        1: "PENDING",
        2: "RUNNING",
    }
    text = (
        "JobId=83 ArrayJobId=81 ArrayTaskId=1 JobName=wrap JobState=CANCELLED Reason=None "
        "ExitCode=0:15 NodeList=cn1\n"
        "JobId=82 ArrayJobId=81 ArrayTaskId=0 JobName=wrap JobState=RUNNING NodeList=cn2\n"
    )
    fields = array.parse_scontrol(text)
    assert (fields[1]["JobState"], fields[1]["NodeList"], fields[0]["JobState"]) == (
        "CANCELLED",
        "cn1",
        "RUNNING",
    )


SCONTROL = (
    "JobId=83 ArrayJobId=81 ArrayTaskId=1 JobName=course-grade JobState=CANCELLED Reason=None "
    "ExitCode=0:15 NodeList=(null)\n"
)


def test_wait_polls_until_no_task_is_left_and_reads_slurm_s_record_of_each(monkeypatch):
    answers = iter(["1|PENDING\n0|RUNNING\n", "0|RUNNING\n", "0|RUNNING\n", ""])
    asked = []

    def slurm(command, **kwargs):
        asked.append(command[0])
        if command[0] == "scontrol":  # task 1 left squeue: its record is read at once
            return processes.Finished(tuple(command), 0, SCONTROL, "", 0.0)
        assert command == ["squeue", "-h", "-r", "-j", "81", "-o", "%K|%T"]
        return processes.Finished(tuple(command), 0, next(answers), "", 0.0)

    monkeypatch.setattr(processes, "run", slurm)
    polls = []
    records = array.wait("81", poll=0, on_poll=lambda: polls.append(1))
    assert len(polls) == 4
    assert asked == ["squeue", "squeue", "scontrol", "squeue", "squeue", "scontrol"]
    assert records[1]["JobState"] == "CANCELLED"


def test_a_job_the_controller_no_longer_knows_has_no_task_left(monkeypatch):
    answer(monkeypatch, {"squeue": ("", "slurm_load_jobs error: Invalid job id specified", 1)})
    assert array.running_tasks("81") == {}
    answer(monkeypatch, {"squeue": ("", "slurm_load_jobs error: Unable to contact controller", 1)})
    assert array.running_tasks("81") is None  # not an answer: asked again


CANCELLED = "slurmstepd-cn1: error: *** JOB 83 ON cn1 CANCELLED AT 2026-11-25T21:52:31 ***\n"


@pytest.mark.parametrize(
    "status, fields, output, state, says",
    [
        ({"state": "done", "node": "cn1"}, None, "", "done", ""),
        (
            {"state": "refused", "node": "cn2", "reason": "cannot grade in a sandbox: bwrap ..."},
            None,
            "",
            "refused",
            "cannot grade in a sandbox",
        ),
        ({"state": "running", "node": "cn1"}, None, CANCELLED, "cancelled", "scancel"),
        (
            {"state": "interrupted", "node": "cn1"},
            {"JobState": "CANCELLED"},
            "",
            "cancelled",
            "cancelled",
        ),
        (
            {"state": "running", "node": "cn1"},
            None,
            "slurmstepd: error: *** JOB 9 ON cn1 CANCELLED AT 2026 DUE TO TIME LIMIT ***",
            "timeout",
            "--sbatch --time=HH:MM:SS",
        ),
        (None, {"JobState": "OUT_OF_MEMORY", "NodeList": "cn2"}, "", "oom", "--sbatch --mem"),
        (
            None,
            None,
            "Traceback ...\nImportError: no module named torch\n",
            "failed",
            "ImportError: no module named torch",
        ),
        (
            None,
            {"JobState": "FAILED", "NodeList": "cn2"},
            "",
            "failed",
            "FAILED: it left no output",
        ),
    ],
)
def test_how_a_task_ended(status, fields, output, state, says):
    outcome = array.task_outcome(1, status, fields, output)
    assert outcome.state == state and says in outcome.reason
    assert outcome.ok == (state == "done")


def test_a_task_that_did_not_finish_is_named_with_what_it_left(tmp_path):
    store = Store(tmp_path)
    share = [Submission(n, "01", tmp_path / n) for n in ("ann", "bo", "cy")]
    keys = {s: f"k-{s.learner}" for s in share}
    store.save("k-ann", SubmissionGrade("ann", "01", "ann"))
    line = array.describe_missing(
        array.TaskOutcome(2, "cancelled", "cn2", "it was cancelled (scancel)"), share, store, keys
    )
    assert line == (
        "task 2 on cn2: cancelled: it was cancelled (scancel); 2 submissions without a result: "
        "bo 01, cy 01"
    )


def test_outcomes_read_each_task_s_status_output_and_slurm_s_record(tmp_path):
    (tmp_path / "task-0.json").write_text(json.dumps({"state": "done", "node": "cn1"}))
    (tmp_path / "task-1.json").write_text(json.dumps({"state": "running", "node": "cn2"}))
    (tmp_path / "task-1.out").write_text("task 1 on cn2: 4 submissions\n" + CANCELLED)
    records = {3: {"JobState": "CANCELLED"}}  # cancelled while pending: no status, no output
    found = array.outcomes(tmp_path, 4, records)
    assert [(o.index, o.state, o.node) for o in found] == [
        (0, "done", "cn1"),
        (1, "cancelled", "cn2"),
        (2, "failed", ""),
        (3, "cancelled", ""),
    ]
