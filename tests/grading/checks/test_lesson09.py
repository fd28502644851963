"""Lesson 09 checkers: pass on the reference, fail with a useful message on known-wrong answers,
and a stub is "not attempted". 09.2 runs answers on forked ranks and 09.5 on forked DataLoader
workers, so their runs are tested in tests/integration/test_failures_runs.py and
test_failures_memory_runs.py; 09.5's verdict on measured figures is tested here."""

import json
import re

import pytest
from torch import nn

from course_utils import failures, job_memory
from course_utils.grading import NOT_ATTEMPTED, CheckFailed, run_check
from course_utils.grading.checks.lesson09 import RECORDED_RUNS, judge_shared_loader


def stub(*args):
    raise NotImplementedError("Exercise 09.k")


def diagnose(log):
    errors = {}
    for rank, message in re.findall(r"^\[rank(\d+)\]:\s*(\w+Error: .*)$", log, re.M):
        errors.setdefault(int(rank), []).append(message)
    for rank, message in re.findall(r"^\w+Error: rank (\d+): (not all .*)$", log, re.M):
        errors.setdefault(int(rank), []).append(message)
    ranks = {int(r) for r in re.findall(r"^rank (\d+)/\d+: started", log, re.M)}
    for rank, messages in errors.items():
        if any("can't allocate memory" in m for m in messages):
            return rank, "out of memory"
    odd = re.search(r"Rank (\d+) is running collective: \S+=\d+, OpType=(?!ALLREDUCE)", log)
    if odd:
        return int(odd[1]), "mismatch"
    silent = sorted(ranks - set(errors))
    if any("joined" in m for messages in errors.values() for m in messages):
        return silent[0], "never joined"
    return silent[0], "hung"


def test_09_1_diagnose_real_logs(tmp_path):
    assert run_check("09.1", diagnose).passed
    assert run_check("09.1", diagnose, tmp_path).passed  # a notebook's folder without runs yet
    trusts_torchrun = run_check("09.1", lambda log: (failures.root_cause_rank(log), "hung"))
    assert trusts_torchrun.verdict == "failed"
    assert "torchrun's 'Root Cause' is the first rank to exit with an error" in (
        trusts_torchrun.message
    )
    vague = run_check("09.1", lambda log: (0, "timeout"))
    assert vague.message.startswith("the log of run 'hang-rank0': expected a cause among [")
    assert run_check("09.1", stub).verdict == NOT_ATTEMPTED


def test_09_1_reads_the_notebooks_own_runs_too(tmp_path):
    """A run in the notebook's folder is checked against its own truth (here: a false one)."""
    recorded = failures.load_runs(RECORDED_RUNS)[0]
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "output.log").write_text(recorded.output)
    wrong_truth = {**recorded.truth, "rank": 1 - recorded.truth["rank"]}
    (tmp_path / "extra" / "truth.json").write_text(json.dumps(wrong_truth))
    result = run_check("09.1", diagnose, tmp_path)
    assert result.verdict == "failed" and "the log of run 'extra'" in result.message


FIXED = """\
#!/bin/bash
#SBATCH --job-name=ddp-fixed
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --time=00:05:00
set -euo pipefail
source slurm/config.sh
course_activate
srun python -m course_utils.jobs.faulty_ddp --timeout 20
"""


def test_09_3_batch_script():
    assert run_check("09.3", lambda broken: FIXED).passed
    unchanged = run_check("09.3", lambda broken: broken)
    assert unchanged.message.startswith(
        "expected no problem left, got line 7: '#SBATCH --time=00:05:00' comes after the first"
    )
    one_task = run_check("09.3", lambda broken: FIXED.replace("per-node=2", "per-node=1"))
    assert one_task.message == (
        "expected 2 tasks, as before (--ntasks-per-node=2 on 1 node), got 1 tasks"
    )
    assert run_check("09.3", stub).verdict == NOT_ATTEMPTED


def accumulate_gradients(model, inputs, targets, micro_batches):
    for xs, ys in zip(inputs.chunk(micro_batches), targets.chunk(micro_batches)):
        loss = nn.functional.mse_loss(model(xs), ys) * len(xs) / len(inputs)
        loss.backward()


def test_09_4_gradient_accumulation():
    assert run_check("09.4", accumulate_gradients).passed

    def divides_by_count(model, inputs, targets, micro_batches):  # wrong for an uneven chunk
        for xs, ys in zip(inputs.chunk(micro_batches), targets.chunk(micro_batches)):
            (nn.functional.mse_loss(model(xs), ys) / micro_batches).backward()

    uneven = run_check("09.4", divides_by_count)
    assert uneven.verdict == "failed"
    assert uneven.message.startswith("10 rows in 4 micro-batches: expected the big batch's")
    assert "its share of the rows" in uneven.message

    def whole_batch(model, inputs, targets, micro_batches):
        nn.functional.mse_loss(model(inputs), targets).backward()

    assert run_check("09.4", whole_batch).message == (
        "12 rows in 4 micro-batches: expected batches of at most 3 rows, got batches of [12]"
    )
    assert run_check("09.4", stub).verdict == NOT_ATTEMPTED


def test_recorded_logs_show_paths_as_a_learner_reads_them():
    runs = failures.load_runs(RECORDED_RUNS)
    assert len(runs) == 8
    for run in runs:
        assert not re.search(r"/work/|/root/|/home/", run.output), run.name
    assert 'File "course_utils/jobs/faulty_ddp.py", line' in runs[0].output


def _loader_run(*own_mib):
    memory = [job_memory.ProcessMemory(1, 500 * 2**20, 300 * 2**20)]  # the reading process
    memory += [job_memory.ProcessMemory(2 + i, m * 2**20, m * 2**20) for i, m in enumerate(own_mib)]
    return job_memory.LoaderRun(batches=8, checksum=0, held=memory)


def test_09_5_verdict_on_what_was_measured():
    judge_shared_loader(_loader_run(12, 13), unknown=0, workers=2, batch_mib=3)  # passes
    with pytest.raises(CheckFailed, match=r"expected each worker under 38 MiB .*got \[75, 12\]"):
        judge_shared_loader(_loader_run(75, 12), unknown=0, workers=2, batch_mib=3)
    with pytest.raises(CheckFailed, match=r"under 80 MiB"):  # big batches are built in the worker
        judge_shared_loader(_loader_run(97, 97), unknown=0, workers=2, batch_mib=24)
    with pytest.raises(CheckFailed, match=r"expected 2 workers reading, got 1"):
        judge_shared_loader(_loader_run(12), unknown=0, workers=2, batch_mib=3)
    with pytest.raises(CheckFailed, match=r"got 5 images that are not in the file"):
        judge_shared_loader(_loader_run(12, 12), unknown=5, workers=2, batch_mib=3)


# ---- held-out cases ------------------------------------------------------------------------


def test_09_4_held_out_cases_fail_chunks_even_only_on_the_visible_sizes(held_out_catches):
    def equal_weights(model, inputs, targets, micro_batches):  # right only when chunks are even
        size = len(inputs) // micro_batches  # 12 // 4 = 3 and 10 // 4 = 2: even on both
        chunks = list(zip(inputs.split(size), targets.split(size)))
        for xs, ys in chunks:
            (nn.functional.mse_loss(model(xs), ys) / len(chunks)).backward()

    failure = held_out_catches("09.4", accumulate_gradients, equal_weights)
    assert re.fullmatch(
        r"\d+ rows in \d micro-batches: expected the big batch's gradients, "
        r"got a relative difference of .*",
        failure,
    ), failure
