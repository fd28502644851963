"""batch: who runs a lesson's jobs (Slurm or local ranks), a local rank's environment, and how a
submission is waited for, cancelled and read back. No process is started: the answers of
sinfo, sbatch, squeue, sacct and scancel are injected (processes.run replaced); the launches and
jobs themselves are tested in tests/integration."""

import pytest

from course_utils import accounting, batch, processes, ranks
from course_utils.lab import cluster
from course_utils.ranks import DistEnv


def test_slurm_when_a_controller_answers_else_local():
    assert batch.choose_launcher(None, "/usr/bin/sbatch", True).kind == "slurm"
    none = batch.choose_launcher(None, None, False)
    assert (none.kind, none.why) == ("local", "no Slurm here: sbatch is not installed")
    down = batch.choose_launcher(
        None, "/usr/bin/sbatch", False, "sinfo: error: Unable to contact\n"
    )
    assert down.kind == "local" and down.why.endswith(": sinfo: error: Unable to contact")


def test_the_variable_decides_when_set():
    assert batch.choose_launcher("local", "/usr/bin/sbatch", True).kind == "local"
    assert batch.choose_launcher("slurm", None, False).why == "COURSE_LAUNCHER=slurm"
    with pytest.raises(ValueError, match="COURSE_LAUNCHER='pbs' must be 'slurm' or 'local'"):
        batch.choose_launcher("pbs", None, False)


def _answers(monkeypatch, sbatch, stdout="", returncode=0):
    calls = []

    def run(command, **kwargs):
        calls.append(command)
        return processes.Finished(tuple(command), returncode, stdout, "", 0.1)

    monkeypatch.setattr(batch.shutil, "which", lambda name: sbatch)
    monkeypatch.setattr(processes, "run", run)
    return calls


def test_find_launcher_asks_sinfo(monkeypatch):
    calls = _answers(monkeypatch, "/usr/bin/sbatch", stdout="idle\nidle\n")
    assert batch.find_launcher({}).kind == "slurm" and calls == [["sinfo", "-h", "-o", "%t"]]
    _answers(monkeypatch, "/usr/bin/sbatch", returncode=1)
    assert batch.find_launcher({}).kind == "local"
    calls = _answers(monkeypatch, None)
    assert batch.find_launcher({}).kind == "local" and calls == []
    calls = _answers(monkeypatch, "/usr/bin/sbatch")
    assert batch.find_launcher({batch.LAUNCHER_VARIABLE: "local"}).kind == "local" and calls == []


def test_the_study_sizes():
    assert [s.name for s in cluster.SHAPES] == ["1x1", "1x2", "1x4", "2x2"]
    assert batch.Shape(2, 2).sbatch_options() == [
        "--nodes=2",
        "--ntasks=4",
        "--ntasks-per-node=2",
    ]
    assert cluster.digest("a") != cluster.digest("b") and len(cluster.digest("a")) == 16


def test_a_local_rank_reads_its_place_as_from_a_launcher():
    base = {"PATH": "/usr/bin", "RANK": "7"}  # a stale rank variable is overwritten
    two_nodes = batch.Shape(2, 2)
    envs = [batch.rank_environ(base, two_nodes, rank, 29555) for rank in range(4)]
    places = [DistEnv.from_environ(env) for env in envs]
    assert [(p.rank, p.local_rank, p.world_size, p.local_world_size) for p in places] == [
        (0, 0, 4, 2),
        (1, 1, 4, 2),
        (2, 0, 4, 2),
        (3, 1, 4, 2),
    ]
    assert {(p.master_addr, p.master_port) for p in places} == {("127.0.0.1", 29555)}
    assert [env[ranks.NODE_VARIABLE] for env in envs] == ["node0", "node0", "node1", "node1"]
    assert envs[3]["PATH"] == "/usr/bin"


def test_one_node_keeps_its_own_name():
    env = batch.rank_environ({}, batch.Shape(1, 4), 3, 29555)
    assert ranks.NODE_VARIABLE not in env  # the node is this machine: staging names it by host
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("3", "4")


# ---- waiting for a job ------------------------------------------------------------------------

SACCT_DONE = "12|mine|COMPLETED|0:0|00:00:04|1|2000M||00:01.2|cpu=1,mem=2000M,node=1|1|\n"
SACCT_FAILED = "12|mine|FAILED|3:0|00:00:04|1|2000M||00:01.2|cpu=1,mem=2000M,node=1|1|\n"


def _queue(states):
    """squeue's answers, one per look: each a list of 'id|STATE|reason' lines."""
    answers = iter(states)

    def squeue(command):
        text = "\n".join(next(answers, []))
        return processes.Finished(command, 0, text, "", 0.0)

    return squeue


@pytest.fixture
def quick(monkeypatch):
    """No pause between two looks at the queue, nor for a record that sacct never completes."""
    monkeypatch.setattr(batch, "POLL", 0.0)
    monkeypatch.setattr(accounting, "SETTLE_WAIT", 0.0)


def test_a_job_is_waited_for_until_it_leaves_the_queue(fake_commands, tmp_path, quick):
    log = tmp_path / "mine-12.out"
    log.write_text("rank 0 says hello\n")
    fake = fake_commands(
        {
            "sbatch": "12\n",
            "squeue": _queue([["12|PENDING|Resources"], ["12|RUNNING|None"], []]),
            "sacct": SACCT_DONE,
        }
    )
    job = batch.submit(tmp_path / "job.sh", ["--x", 1], name="mine", logs=tmp_path)
    assert (job.returncode, job.state, job.job_id) == (0, "COMPLETED", "12")
    assert job.output == "rank 0 says hello\n" and job.steps[0].total_cpu_s == pytest.approx(1.2)
    sbatch = fake.calls[0]
    assert sbatch[:2] == ("sbatch", "--parsable") and sbatch[-2:] == ("--x", "1")
    assert not any(c[0] == "scancel" for c in fake.calls)


def test_a_failed_job_gives_its_exit_code(fake_commands, tmp_path, quick):
    fake_commands({"sbatch": "12\n", "squeue": _queue([[]]), "sacct": SACCT_FAILED})
    job = batch.submit(tmp_path / "job.sh", name="mine", logs=tmp_path)
    assert (job.returncode, job.state) == (3, "FAILED")


def test_a_job_s_end_is_read_once_sacct_has_recorded_it(fake_commands, tmp_path, monkeypatch):
    """slurmdbd records the end a moment after the job left the queue: the first reading still
    says RUNNING (a finished job taken for a failed one, exit code 1, until this waited)."""
    monkeypatch.setattr(batch, "POLL", 0.0)
    monkeypatch.setattr(accounting, "SETTLE_POLL", 0.0)
    readings = iter([SACCT_DONE.replace("COMPLETED", "RUNNING"), SACCT_DONE])
    fake = fake_commands(
        {"sbatch": "12\n", "squeue": _queue([[]]), "sacct": lambda command: next(readings)}
    )
    job = batch.submit(tmp_path / "job.sh", name="mine", logs=tmp_path)
    assert (job.returncode, job.state) == (0, "COMPLETED")
    assert sum(c[0] == "sacct" for c in fake.calls) == 2


def test_a_cluster_without_accounting_is_not_waited_for(fake_commands, tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "POLL", 0.0)
    no_accounting = processes.Finished(
        ("sacct",), 1, "", "sacct: error: Slurm accounting storage is disabled\n", 0.0
    )
    fake_commands(
        {
            "sbatch": "12\n",
            "squeue": _queue([[]]),
            "sacct": no_accounting,
            "scontrol": "JobId=12 JobState=COMPLETED Reason=None\n",
        }
    )
    job = batch.submit(tmp_path / "job.sh", name="mine", logs=tmp_path)
    assert (job.returncode, job.state, job.steps) == (0, "COMPLETED", ())
    assert job.seconds < accounting.SETTLE_WAIT


def test_a_job_still_waiting_at_the_limit_is_said_to_wait_and_cancelled(
    fake_commands, tmp_path, quick
):
    fake = fake_commands(
        {
            "sbatch": "12\n",
            "squeue": _queue([["12|PENDING|Priority"]] * 1000),
            "scancel": "",
            "sacct": "",
        }
    )
    job = batch.submit(tmp_path / "job.sh", name="mine", logs=tmp_path, timeout=0.05)
    assert job.state == "PENDING" and job.returncode == 1
    assert "still waiting in the queue after 0.05 s (reason: Priority)" in job.output
    assert "cancelled it with scancel" in job.output and ("scancel", "12") in fake.calls


def test_a_job_running_past_the_limit_is_cancelled_and_said_so(fake_commands, tmp_path, quick):
    fake = fake_commands(
        {
            "sbatch": "12\n",
            "squeue": _queue([["12|RUNNING|None"]] * 1000),
            "scancel": "",
            "sacct": "",
        }
    )
    job = batch.submit(tmp_path / "job.sh", name="mine", logs=tmp_path, timeout=0.05)
    assert job.state == "CANCELLED" and "ran past the wait's 0.05 s" in job.output
    assert ("scancel", "12") in fake.calls


def test_an_interrupted_wait_cancels_the_job(fake_commands, monkeypatch, capsys):
    def interrupted(command):
        raise KeyboardInterrupt

    fake = fake_commands({"squeue": interrupted, "scancel": ""})
    with pytest.raises(KeyboardInterrupt):
        batch.wait("12", timeout=60)
    assert ("scancel", "12") in fake.calls
    assert "interrupted: cancelled job 12 (scancel)" in capsys.readouterr().out


def test_a_refused_submission_says_why(fake_commands, tmp_path):
    refused = processes.Finished(("sbatch",), 1, "", "sbatch: error: invalid partition", 0.1)
    fake_commands({"sbatch": refused})
    job = batch.submit(tmp_path / "job.sh", name="mine", logs=tmp_path)
    assert job.returncode == 1 and "sbatch refused the job: sbatch: error: invalid" in job.output


def test_a_script_runs_here_by_bash_where_no_slurm_answers(fake_commands, tmp_path, monkeypatch):
    monkeypatch.delenv(batch.LAUNCHER_VARIABLE, raising=False)
    fake = fake_commands({"bash": "course doctor says hello\n"})
    local = batch.Launcher("local", "no Slurm here")
    job = batch.run_script(tmp_path / "doctor.sh", "doctor", tmp_path, launcher=local)
    assert (job.launcher, job.returncode, job.job_id) == ("local", 0, None)
    assert job.output.endswith("course doctor says hello\n")
    assert fake.calls == [("bash", str(tmp_path / "doctor.sh"))]
    env = fake.envs[0]
    assert env[batch.LAUNCHER_VARIABLE] == "local" and env[batch.JOB_VARIABLE].startswith("local-")


def test_a_script_is_submitted_where_slurm_answers(fake_commands, tmp_path, quick):
    fake_commands({"sbatch": "12\n", "squeue": _queue([[]]), "sacct": SACCT_DONE})
    slurm = batch.Launcher("slurm", "the test says so")
    job = batch.run_script(tmp_path / "doctor.sh", "doctor", tmp_path, launcher=slurm)
    assert (job.launcher, job.job_id, job.state) == ("slurm", "12", "COMPLETED")
