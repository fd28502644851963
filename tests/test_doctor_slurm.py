"""`course doctor` inside a Slurm job: the job's rows and the launch warnings are pure functions
of the job's variables and `scontrol show job`'s text, injected here as measured on the CI
cluster (Slurm 22.05): a server as an srun step, and one in a batch script with cores as tasks.
"""

from datetime import datetime, timedelta

import pytest

from course_utils import processes
from course_utils.doctor import slurm
from course_utils.doctor.findings import INFO, OK, WARN

# `srun -N1 -n1 -c4 --gres=gpu:1 ...`: the variables a job step gets (the rest left out).
STEP = {
    "SLURM_JOB_ID": "7",
    "SLURM_JOB_NAME": "jupyter",
    "SLURMD_NODENAME": "cn1",
    "SLURM_STEP_ID": "0",
    "SLURM_NTASKS": "1",
    "SLURM_NNODES": "1",
    "SLURM_CPUS_ON_NODE": "4",
    "SLURM_CPUS_PER_TASK": "4",
    "SLURM_GPUS_ON_NODE": "1",
    "CUDA_VISIBLE_DEVICES": "0",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
}
STEP_SCONTROL = """JobId=7 JobName=jupyter
   JobState=RUNNING Reason=None Dependency=(null)
   RunTime=00:00:00 TimeLimit=00:30:00 TimeMin=N/A
   StartTime=2026-11-25T20:02:59 EndTime=2026-11-25T20:32:59 Deadline=N/A
   NodeList=cn1
   BatchHost=cn1
   NumNodes=1 NumCPUs=4 NumTasks=1 CPUs/Task=4 ReqB:S:C:T=0:0:*:*
   TRES=cpu=4,node=1,billing=4
   MinCPUsNode=4 MinMemoryCPU=500M MinTmpDiskNode=0
   TresPerNode=gres:gpu:1
   Power=
"""
# `sbatch --nodes=1 --ntasks-per-node=4 --mem=3G --time=20`: the batch script itself, no step.
BATCH = {
    "SLURM_JOB_ID": "10",
    "SLURM_JOB_NAME": "jupyter",
    "SLURMD_NODENAME": "cn1",
    "SLURM_NTASKS": "4",
    "SLURM_NTASKS_PER_NODE": "4",
    "SLURM_NNODES": "1",
    "SLURM_CPUS_ON_NODE": "4",
    "SLURM_MEM_PER_NODE": "3072",
    "SLURM_PROCID": "0",
}
BATCH_SCONTROL = """JobId=10 JobName=jupyter
   RunTime=00:00:00 TimeLimit=00:20:00 TimeMin=N/A
   StartTime=2026-11-25T20:03:03 EndTime=2026-11-25T20:23:03 Deadline=N/A
   Partition=debug AllocNode:Sid=localhost:3971
   BatchHost=cn1
   NumNodes=1 NumCPUs=4 NumTasks=4 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   TRES=cpu=4,node=1,billing=4
   Socks/Node=* NtasksPerN:B:S:C=4:0:*:* CoreSpec=*
   MinCPUsNode=4 MinMemoryNode=3G MinTmpDiskNode=0
"""
NOW = datetime(2026, 11, 25, 20, 5, 3)


def _rows(environ, scontrol, now=NOW):
    return {f.topic: f for f in slurm.job_findings(environ, scontrol, now)}


def test_scontrol_fields_are_read_as_key_value_pairs():
    fields = slurm.parse_scontrol(BATCH_SCONTROL)
    assert fields["TRES"] == "cpu=4,node=1,billing=4" and fields["CPUs/Task"] == "1"
    assert fields["AllocNode:Sid"] == "localhost:3971" and fields["EndTime"].endswith("20:23:03")


def test_a_server_started_as_an_srun_step():
    rows = _rows(STEP, STEP_SCONTROL)
    assert rows["slurm job"].value == "7 (jupyter) on cn1, in step 0 (srun)"
    assert rows["slurm job"].status == OK and rows["slurm job"].advice == ""
    assert rows["job cpus"].value == "4 on this node, 1 task x 4 CPUs"
    assert rows["job gpus"].value == "1 on this node, CUDA_VISIBLE_DEVICES=0"
    assert rows["job memory"].value == "500M per CPU (scontrol MinMemoryCPU)"
    assert rows["job time left"].value == "0:27:56 left of 00:30:00, ends 2026-11-25T20:32:59"
    assert rows["job time left"].status == INFO
    assert slurm.launch_findings(STEP) == []  # one task in its own step: nothing breaks


def test_a_server_in_the_batch_script_with_cores_as_tasks():
    rows = _rows(BATCH, BATCH_SCONTROL)
    assert rows["slurm job"].value.startswith("10 (jupyter) on cn1, outside any step")
    assert rows["job cpus"].value == "4 on this node, 4 tasks x 1 CPU"  # CPUs/Task: scontrol
    assert rows["job gpus"].value == "none asked for"
    assert rows["job memory"].value == "3072 MB per node (SLURM_MEM_PER_NODE)"
    assert rows["job time left"].value.startswith("0:18:00 left of 00:20:00")
    (warning,) = slurm.launch_findings(BATCH)
    assert warning.status == WARN and warning.topic == "local launch"
    assert warning.value.startswith("SLURM_NTASKS=4, SLURM_NTASKS_PER_NODE=4: the job's 4 tasks")
    assert "Fix: where the server starts, ask for cores as CPUs (--ntasks=1 --cpus-per-task=4)" in (
        warning.advice
    )
    assert "ranks.local_launch_environ" in warning.advice


def test_without_scontrol_each_figure_the_variables_lack_is_not_reported():
    environ = {"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "0"}
    rows = _rows(environ, None)
    assert rows["slurm job"].value == "12 (unnamed) on a node not reported, in step 0 (srun)"
    assert "scontrol show job did not answer" in rows["slurm job"].advice
    for topic in ("job cpus", "job gpus", "job memory", "job time left"):
        assert rows[topic].value == "not reported", topic


@pytest.mark.parametrize(
    "environ, scontrol, says",
    [
        ({"SLURM_JOB_GPUS": "0,1"}, "", "2 on this node (ids 0,1)"),
        ({}, "TresPerNode=gres:gpu:a100:2", "TresPerNode=gres:gpu:a100:2"),
        ({}, "AllocTRES=cpu=8,node=1,gres/gpu=2", "AllocTRES=cpu=8,node=1,gres/gpu=2"),
        ({"CUDA_VISIBLE_DEVICES": "3"}, None, "not reported, CUDA_VISIBLE_DEVICES=3"),
    ],
)
def test_gpus_from_the_variables_else_from_scontrol(environ, scontrol, says):
    fields = slurm.parse_scontrol(scontrol) if scontrol else {}
    assert slurm.job_gpus(environ, fields) == says


def test_time_left_from_slurm_job_end_time_and_unlimited_jobs():
    end = NOW + timedelta(minutes=5)
    environ = dict(STEP, SLURM_JOB_END_TIME=str(int(end.timestamp())))
    rows = _rows(environ, None)
    assert rows["job time left"].value == f"0:05:00 left, ends {end.isoformat()}"
    assert rows["job time left"].status == WARN and "save your work" in rows["job time left"].advice
    unlimited = _rows(STEP, STEP_SCONTROL.replace("TimeLimit=00:30:00", "TimeLimit=UNLIMITED"))
    assert unlimited["job time left"].value == "no time limit (scontrol TimeLimit=UNLIMITED)"


def test_outside_a_job_one_row_says_so():
    assert [(f.topic, f.value) for f in slurm.job_findings({}, None, NOW)] == [
        ("slurm job", "not in a Slurm job (no SLURM_JOB_ID)")
    ]


def test_stale_launcher_variables_are_named_with_the_fix():
    (warning,) = slurm.launch_findings({"RANK": "1", "WORLD_SIZE": "2", "HOME": "/root"})
    assert warning.status == WARN
    assert warning.value.startswith("RANK=1, WORLD_SIZE=2: a launcher's variables")
    assert "unset RANK WORLD_SIZE" in warning.advice
    assert "for v in ('RANK', 'WORLD_SIZE'): os.environ.pop(v, None)" in warning.advice


PER_NODE_QUOTE = (
    "the number of tasks per node configured in SLURM `--ntasks-per-node=4` does not match"
)
NTASKS_QUOTE = "You set `--ntasks=4` in your SLURM bash script, but this variable is not supported"


@pytest.mark.parametrize(
    "environ, quote",
    [(BATCH, PER_NODE_QUOTE), ({**BATCH, "SLURM_NTASKS_PER_NODE": ""}, NTASKS_QUOTE)],
)
def test_the_warning_quotes_what_lightning_itself_says(environ, quote, monkeypatch):
    """The doctor's quote is Lightning's own words, for the variables of such a job."""
    from lightning.fabric.plugins.environments import SLURMEnvironment

    for name in list(environ) + ["SLURM_STEP_ID"]:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        if value:
            monkeypatch.setenv(name, value)
    kept = {name: value for name, value in environ.items() if value}
    (warning,) = slurm.launch_findings(kept)
    assert quote in warning.advice
    with pytest.raises((ValueError, RuntimeError), match=quote.replace("`", ".")):
        SLURMEnvironment().validate_settings(num_devices=2, num_nodes=1)


def test_lightning_leaves_a_job_named_interactive_alone():
    (warning,) = slurm.launch_findings(dict(BATCH, SLURM_JOB_NAME="interactive"))
    assert "refuses" not in warning.advice and "interactive mode" in warning.advice


def test_slurm_job_asks_scontrol_through_processes(monkeypatch):
    asked = []

    def scontrol(command, *, timeout, **options):
        asked.append(list(command))
        return processes.Finished(tuple(command), 0, BATCH_SCONTROL, "", 0.0)

    monkeypatch.setattr(processes, "run", scontrol)
    rows = {f.topic: f for f in slurm.slurm_job(BATCH)}
    assert asked == [["scontrol", "show", "job", "10"]]
    assert rows["job cpus"].value == "4 on this node, 4 tasks x 1 CPU"
    assert rows["local launch"].status == WARN


@pytest.mark.parametrize(
    "answer",
    [
        FileNotFoundError(2, "No such file or directory: 'scontrol'"),  # a node without Slurm
        processes.Finished(("scontrol",), 1, "", "slurm_load_jobs error: Invalid job id\n", 0.1),
    ],
)
def test_slurm_job_without_an_answer_from_scontrol(answer, monkeypatch):
    def scontrol(command, **options):
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(processes, "run", scontrol)
    rows = {f.topic: f for f in slurm.slurm_job(BATCH)}
    assert "did not answer" in rows["slurm job"].advice
    assert rows["job memory"].value == "3072 MB per node (SLURM_MEM_PER_NODE)"  # the variables
    assert rows["job time left"].value == "not reported"


def test_outside_a_job_no_scontrol_is_asked(monkeypatch):
    def no_process(command, **options):
        raise AssertionError(f"asked {command} outside a job")

    monkeypatch.setattr(processes, "run", no_process)
    assert [f.topic for f in slurm.slurm_job({"HOME": "/root"})] == ["slurm job"]


@pytest.mark.parametrize(
    "environ, scontrol, says",
    [
        ({"SLURM_MEM_PER_CPU": "2000"}, "", "2000 MB per CPU (SLURM_MEM_PER_CPU)"),
        ({}, "MinCPUsNode=4 MinMemoryNode=3G", "3G per node (scontrol MinMemoryNode)"),
        ({}, "MinCPUsNode=4 MinMemoryNode=0", "not reported"),  # none asked for
    ],
)
def test_memory_from_the_variables_else_from_scontrol(environ, scontrol, says):
    assert slurm.job_memory(environ, slurm.parse_scontrol(scontrol)) == says
