"""distributed.launch and the DDP program, run for real: torchrun, 2 gloo ranks on the CPU."""

import os
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
        "course_utils.jobs.ddp_train", *common, "--batch-size", "32", "--save", tmp_path / "two.pt",
        nproc=2, **kw,
    )  # fmt: skip
    one = distributed.launch(
        "course_utils.jobs.ddp_train", *common, "--batch-size", "64", "--save", tmp_path / "one.pt",
        torchrun=False, **kw,
    )  # fmt: skip
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
