"""distributed.launch and the DDP program, run for real: torchrun, 2 gloo ranks on the CPU."""

import os
import re
import subprocess
import sys

import pytest
import torch

from course_utils import distributed


@pytest.mark.parametrize("join_first", [False, True], ids=["before-the-group", "in-the-group"])
def test_launch_error_carries_the_failing_ranks_message(tmp_path, join_first):
    (tmp_path / "fails_on_rank_1.py").write_text(
        "import os\nimport torch.distributed as dist\n"
        + ("dist.init_process_group('gloo')\n" if join_first else "")
        + "if int(os.environ['RANK']) == 1:\n"
        + "    raise RuntimeError('rank one cannot find shard 7')\n"
        + ("dist.barrier()\n" if join_first else "")
    )
    env = {"PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}
    with pytest.raises(RuntimeError) as failed:
        distributed.launch("fails_on_rank_1", nproc=2, env=env, echo=False, timeout=120)
    assert "cause (rank 1): RuntimeError: rank one cannot find shard 7" in str(failed.value)


GIVE_UP = {
    # the documentation's scripts often end with sys.exit("message"): no traceback at all
    "sys-exit": (
        "import sys\nsys.exit('rank 1 gives up: no data in /scratch/data')\n",
        "rank 1 exited with code 1 without a Python traceback; its last lines:\n"
        "  rank 1 started\n  rank 1 gives up: no data in /scratch/data",
    ),
    # a C++ exception that nobody catches: libstdc++ writes two lines to fd 2, then abort()
    "cpp-abort": (
        "import os, sys\n"
        'sys.stderr.write("terminate called after throwing an instance of '
        "'c10::Error'\\n  what():  shard 7 is corrupt\\n\")\n"
        "sys.stderr.flush()\nos.abort()\n",
        "rank 1 was killed by signal 6 without a Python traceback; its last lines:\n"
        "  rank 1 started\n"
        "  terminate called after throwing an instance of 'c10::Error'\n"
        "    what():  shard 7 is corrupt",
    ),
}


@pytest.mark.parametrize("how", list(GIVE_UP))
def test_launch_error_quotes_the_last_lines_of_a_rank_without_a_traceback(tmp_path, how):
    code, expected = GIVE_UP[how]
    (tmp_path / "gives_up.py").write_text(
        "import os, time\nprint('rank', os.environ['RANK'], 'started', flush=True)\n"
        "if os.environ['RANK'] == '1':\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "time.sleep(5)\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}
    with pytest.raises(RuntimeError) as failed:
        distributed.launch("gives_up", nproc=2, env=env, echo=False, timeout=120)
    assert f"cause: {expected}" in str(failed.value)


# A kernel in the batch script of a job with cores asked as tasks (Open OnDemand's style), with
# stale torchrun variables besides.
HUB_JOB = {
    "SLURM_JOB_ID": "4242",
    "SLURM_NTASKS": "4",
    "SLURM_PROCID": "0",
    "SLURM_NTASKS_PER_NODE": "4",
    "SLURM_TASKS_PER_NODE": "4",
    "SLURM_JOB_NAME": "jupyter",
    "SLURM_JOB_NODELIST": "localhost",
    "RANK": "3",
    "WORLD_SIZE": "2",
    "LOCAL_RANK": "1",
}


def test_a_launch_from_inside_a_job_is_a_launch_of_its_own(tmp_path, monkeypatch, capsys):
    for name, value in HUB_JOB.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "who_am_i.py").write_text(
        "import os\nfrom course_utils.ranks import DistEnv\nenv = DistEnv.from_environ()\n"
        "job = sorted(k for k in os.environ if k.startswith('SLURM_'))\n"
        "print(f'rank {env.rank} of {env.world_size} from {env.source}; Slurm variables {job}')\n"
    )
    seen = distributed.launch("who_am_i", nproc=2, env={"PYTHONPATH": str(tmp_path)})
    printed = capsys.readouterr().out
    assert printed.startswith("local launch: set aside SLURM_JOB_ID=4242, SLURM_NTASKS=4")
    for rank in (0, 1):
        assert f"rank {rank} of 2 from torchrun; Slurm variables []" in seen.output


def test_lightning_launches_its_own_ranks_from_inside_a_job(monkeypatch):
    # Lesson 05's Lightning cell in a kernel that Open OnDemand starts with --ntasks-per-node=4:
    # Lightning read SLURM_NTASKS and refused "devices=2" (measured on the CI cluster)
    for name, value in HUB_JOB.items():
        monkeypatch.setenv(name, value)
    lit = distributed.launch(
        "course_utils.jobs.lightning_train",
        "--epochs",
        "1",
        "--images",
        "256",
        env={"OMP_NUM_THREADS": "1"},
        torchrun=False,
        echo=False,
    )
    assert len(set(re.findall(r"parameter checksum (\w+)", lit.output))) == 1


def test_launch_streams_and_reports_failure(capsys):
    result = distributed.launch("platform", torchrun=False)  # prints the platform, exits 0
    assert result.returncode == 0 and result.output in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="exited with code 1"):
        distributed.launch("course_utils.no_such_module", torchrun=False, echo=False)


def test_two_ranks_equal_one_process_with_double_batch(tmp_path):
    """DDP with 2 gloo ranks x batch 32 ends where 1 process x batch 64 ends (within 1e-6);
    the single process runs as a plain `python -m course_utils.jobs.ddp_train`."""
    common = ["--epochs", "2", "--max-steps", "4", "--lr", "0.01", "--threads", "1"]
    common += ["--images", "1024"]
    kw = {"env": {"OMP_NUM_THREADS": "1"}, "echo": False}
    two = distributed.launch(
        "course_utils.jobs.ddp_train",
        *common,
        "--batch-size",
        "32",
        "--save",
        tmp_path / "two.pt",
        nproc=2,
        **kw,
    )
    one = distributed.launch(
        "course_utils.jobs.ddp_train",
        *common,
        "--batch-size",
        "64",
        "--save",
        tmp_path / "one.pt",
        torchrun=False,
        **kw,
    )
    assert "rank 1/2 (local 1)" in two.output and "rank 0/1 (local 0)" in one.output
    sums = [line.split()[-1] for line in two.output.splitlines() if "parameter checksum" in line]
    assert len(sums) == 2 and sums[0] == sums[1]
    a, b = (torch.load(tmp_path / f"{n}.pt", weights_only=True) for n in ("two", "one"))
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-6

    def losses(run):
        return [
            float(line.split()[3]) for line in run.output.splitlines() if line.startswith("epoch")
        ]

    # The two-rank loss is the mean over both ranks' images: the same number as one process's.
    assert len(losses(one)) == 2 and losses(two) == pytest.approx(losses(one), abs=1e-4)
    assert "throughput:" in one.output


def test_exit_now_keeps_the_output_and_the_exit_code():
    # os._exit skips the flush at interpreter exit: exit_now must flush first. Buffered output,
    # as in a batch job's log file (PYTHONUNBUFFERED would hide a missing flush).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    code = "from course_utils.distributed import exit_now\nprint('done', end='')\nexit_now(3)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert (run.returncode, run.stdout) == (3, "done")
