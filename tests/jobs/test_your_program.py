"""course_utils.jobs.your_program: a learner's program gets both styles of rank variables."""

import pytest
from slurm_task import SLURM_TASK

from course_utils.jobs import your_program
from course_utils.ranks import DistEnv


@pytest.fixture(autouse=True)
def scontrol(fake_commands):
    """Where Slurm is installed, the first host comes from scontrol: its answer, injected."""
    fake_commands({"scontrol show hostnames": "cn1\ncn2\n"})


def test_slurm_task_gets_torchruns_variables():
    values = your_program.rank_variables(DistEnv.from_environ(SLURM_TASK))
    assert {k: values[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")} == {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
    }
    assert values["MASTER_ADDR"] == "cn1" and values["MASTER_PORT"] == str(20000 + 4242)


def test_torchrun_worker_gets_slurms_variables():
    # under torchrun SLURM_PROCID is the torchrun task's (0 per node): it must become the rank
    worker = {
        **SLURM_TASK,
        "SLURM_PROCID": "1",
        "SLURM_LOCALID": "0",
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
    }
    values = your_program.rank_variables(DistEnv.from_environ(worker))
    assert (values["SLURM_PROCID"], values["SLURM_LOCALID"], values["SLURM_NTASKS"]) == (
        "3",
        "1",
        "4",
    )


def test_master_exports_for_a_batch_script():
    assert your_program.master_exports(SLURM_TASK) == "export MASTER_ADDR=cn1 MASTER_PORT=24242"


def test_usage_errors(capsys):
    assert your_program.main([]) == 2
    assert your_program.main(["-m"]) == 2
    assert your_program.main(["--epochs", "3"]) == 2
    assert "usage: python -m course_utils.jobs.your_program" in capsys.readouterr().err
