"""course_utils.jobs.faulty_ddp and jobs.stacks: options and truth (runs: tests/integration)."""

import json

import pytest
import torch

from course_utils.jobs import faulty_ddp, stacks


def test_fault_step_must_be_a_step_of_a_faulty_run(capsys):
    with pytest.raises(SystemExit):
        faulty_ddp.parse_args(["--fault", "hang", "--steps", "1"])
    assert "--fault-step 2 must be one of the --steps (1..1)" in capsys.readouterr().err
    assert faulty_ddp.parse_args(["--steps", "1"]).fault == "none"  # no fault: any step count


def test_truth_names_the_rank_and_the_cause(tmp_path):
    args = faulty_ddp.parse_args(["--fault", "never-joins", "--faulty-rank", "0"])
    faulty_ddp.write_truth(str(tmp_path / "truth.json"), args, world_size=2)
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert truth == {"fault": "never-joins", "rank": 0, "world_size": 2, "cause": "never joined"}


def test_an_impossible_batch_fails_with_the_allocators_message():
    from course_utils.failing.failures import IMPOSSIBLE_ROWS

    with pytest.raises(RuntimeError, match="can't allocate memory"):
        faulty_ddp.load_next_batch(1, rows=IMPOSSIBLE_ROWS)


def test_stacks_usage_and_a_job_with_no_rank_here(capsys):
    assert stacks.main([]) == 2 and stacks.main(["abc"]) == 2
    assert stacks.job_ranks("999999999", "nowhere") == {}
    assert stacks.main(["999999999"]) == 1
    assert "no rank of job 999999999 runs on" in capsys.readouterr().out


def test_each_rank_reads_a_batch_of_its_own_drawn_from_the_seed():
    args = faulty_ddp.parse_args(["--seed", "7"])
    assert args.seed == 7 and faulty_ddp.parse_args([]).seed == 0
    rank0, rank1 = (faulty_ddp.load_next_batch(1, seed=7, rank=r) for r in (0, 1))
    assert not torch.equal(rank0, rank1)
    assert torch.equal(rank0, faulty_ddp.load_next_batch(1, seed=7, rank=0))
    assert not torch.equal(rank0, faulty_ddp.load_next_batch(1, seed=8, rank=0))
