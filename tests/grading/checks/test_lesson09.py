"""Lesson 09 checkers: pass on the reference, fail with a useful message on known-wrong answers,
and a stub, or a run exercise without the learner's run, is "not attempted yet".

The runs themselves start processes (ranks, jobs, DataLoader workers), so they are tested in
tests/integration/test_failures_runs.py (09.2, 09.3 on local ranks), test_failures_slurm.py
(09.3 submitted) and test_failures_memory_runs.py (09.5). Here the course's functions that the
learner's code calls (batch.local_run, batch.submit, sacct) answer as a run would, so the
verdicts on what a run produced are tested without one."""

import json
import random
import re
from pathlib import Path

import pytest
from torch import nn

from course_utils import batch, launching
from course_utils.failing import failures
from course_utils.grading import NOT_ATTEMPTED, CheckFailed, run_check
from course_utils.grading.checks import lesson09_references as harness
from course_utils.grading.checks.lesson09 import judge_shared_loader


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
    as_text = run_check("09.1", lambda log: (str(diagnose(log)[0]), diagnose(log)[1]))
    assert as_text.message == "the log of run 'hang-rank0': expected the rank as an int, got '0'"
    assert run_check("09.1", stub).verdict == NOT_ATTEMPTED


def test_09_1_reads_the_notebooks_own_runs_too(tmp_path):
    """A run in the notebook's folder is checked against its own truth (here: a false one)."""
    recorded = failures.load_runs(failures.RECORDED_RUNS)[0]
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "output.log").write_text(recorded.output)
    wrong_truth = {**recorded.truth, "rank": 1 - recorded.truth["rank"]}
    (tmp_path / "extra" / "truth.json").write_text(json.dumps(wrong_truth))
    result = run_check("09.1", diagnose, tmp_path)
    assert result.verdict == "failed" and "the log of run 'extra'" in result.message


# ---- 09.2 (the runs: tests/integration/test_failures_runs.py) ---------------------------------


def test_09_2_without_a_run_of_ranks_is_not_attempted_or_fails():
    assert run_check("09.2", lambda losses: None).verdict == NOT_ATTEMPTED
    assert run_check("09.2", stub).verdict == NOT_ATTEMPTED
    typed_in = run_check("09.2", lambda losses: [sum(losses) / len(losses), None])
    assert typed_in.verdict == "failed"
    assert typed_in.message.startswith("2 ranks: expected a run of launching.run_ranks, got [")


def _ranks_answer(results, pids=(11, 12, 13), collectives=(["all_reduce"],) * 3, failed=None):
    """A stand-in for launching.run_ranks that answers as ranks would have (no process)."""

    def fake(fn, world_size=2, timeout=3.0, env=None):
        if failed:
            raise launching.RanksFailed(failed)
        return [
            {"result": results(world_size)[r], "pid": pids[r], "collectives": collectives[r]}
            for r in range(world_size)
        ]

    return fake


def _run_step(losses):
    return launching.run_ranks(lambda rank, size: None, len(losses), timeout=3.0)


def _draw():
    return random.Random(3)


def test_09_2_verdicts_on_what_each_rank_returned(monkeypatch):
    # the check draws 2 losses, then 3, from the generator it is given: the same draws here
    first, second = _draw(), _draw()
    two = [round(first.uniform(0.5, 9.5), 3) for _ in range(2)]
    three = [round(first.uniform(0.5, 9.5), 3) for _ in range(3)]
    answers = {2: [sum(two) / 2, None], 3: [sum(three) / 3, None, None]}
    monkeypatch.setattr(launching, "run_ranks", _ranks_answer(lambda n: answers[n]))
    assert run_check("09.2", _run_step, draw=second).passed

    wrong = {2: [sum(two), None], 3: [sum(three), None, None]}  # the sum, not the mean
    monkeypatch.setattr(launching, "run_ranks", _ranks_answer(lambda n: wrong[n]))
    summed = run_check("09.2", _run_step, draw=_draw())
    assert summed.verdict == "failed"
    assert summed.message.startswith("2 ranks with losses the check drew: expected [")

    no_collective = _ranks_answer(lambda n: answers[n], collectives=([], ["all_reduce"], []))
    monkeypatch.setattr(launching, "run_ranks", no_collective)
    closure = run_check("09.2", _run_step, draw=_draw())
    assert "every rank entering the same collectives (all_reduce)" in closure.message
    assert "the mean must come from the ranks" in closure.message

    one_process = _ranks_answer(lambda n: answers[n], pids=(11, 11, 11))
    monkeypatch.setattr(launching, "run_ranks", one_process)
    assert "each a process of its own" in run_check("09.2", _run_step, draw=_draw()).message


def test_09_2_a_hang_fails_with_the_rule(monkeypatch):
    said = "rank 0: RuntimeError: Timed out waiting 3000ms for recv operation to complete"
    monkeypatch.setattr(launching, "run_ranks", _ranks_answer(None, failed=said))
    hangs = run_check("09.2", _run_step)
    assert hangs.message.startswith(
        "2 ranks with losses the check drew: expected every rank to finish within the run's "
        f"timeout, got {said}. Every rank must call the same collectives"
    )


# ---- 09.3 ----------------------------------------------------------------------------------

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
srun python -m course_utils.jobs.faulty_ddp --timeout 20 "$@"
"""


def _run_locally(script, folder, seed):
    return batch.local_run("ddp", failures.PROGRAM, ["--seed", seed], batch.Shape(1, 2))


def _job_output(seed, world_size=2, ranks=(0, 1), used=None):
    total = harness.trained_sum(seed, world_size)
    used = seed if used is None else used
    return "".join(f"rank {r}: finished, seed {used}, parameter sum {total:.6f}\n" for r in ranks)


@pytest.fixture
def job_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the probe writes runs/09/jobs beside the "notebook"
    return tmp_path


def test_09_3_static_rules_and_the_time_limit(job_folder):
    unchanged = run_check("09.3", lambda broken: broken, _run_locally)
    assert unchanged.message.startswith(
        "expected no problem left, got line 7: '#SBATCH --time=00:05:00' comes after the first"
    )
    one_task = run_check("09.3", lambda b: FIXED.replace("per-node=2", "per-node=1"), stub)
    assert one_task.message == (
        "expected 2 tasks on 1 node, as before (--ntasks-per-node=2), got 1 tasks on 1 node(s)"
    )
    week = run_check("09.3", lambda b: FIXED.replace("00:05:00", "7-00:00:00"), stub)
    assert week.verdict == "failed"
    assert week.message.startswith("expected a --time of at most 5 minutes (00:05:00)")
    assert week.message.endswith("got --time=7-00:00:00")
    no_args = run_check("09.3", lambda b: FIXED.replace(' "$@"', ""), stub)
    assert "the srun line passing the script's own arguments on" in no_args.message
    assert run_check("09.3", stub, stub).verdict == NOT_ATTEMPTED
    assert run_check("09.3", lambda b: FIXED, stub).verdict == NOT_ATTEMPTED


def test_09_3_without_the_run_is_not_attempted_and_a_typed_in_job_fails(job_folder):
    missing = run_check("09.3", lambda b: FIXED, lambda script, folder, seed: None)
    assert missing.verdict == NOT_ATTEMPTED
    assert missing.message.startswith("run your repaired script first")

    def typed_in(script, folder, seed):  # the job's record written by hand, no run
        return batch.Job("ddp", "local", 0, _job_output(seed), 1.0)

    forged = run_check("09.3", lambda b: FIXED, typed_in)
    assert forged.verdict == "failed"
    assert forged.message == (
        "expected the job batch.submit or batch.local_run returned, got a Job that no run of "
        "theirs made"
    )


def _local_job(output_of, code=0):
    calls = []

    def fake(name, module, args, shape, threads=1, timeout=300, environ=None):
        calls.append((module, list(args), shape))
        seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 0
        return batch.Job(name, "local", code, output_of(seed, shape), 1.0)

    return fake, calls


def test_09_3_judges_what_the_ranks_printed(job_folder, monkeypatch):
    fake, calls = _local_job(lambda seed, shape: _job_output(seed, shape.ranks))
    monkeypatch.setattr(batch, "local_run", fake)
    done = run_check("09.3", lambda b: FIXED, _run_locally, seed=41)
    assert done.passed, done.message
    assert calls[0][0] == failures.PROGRAM and (job_folder / "runs/09/jobs").is_dir()

    def one_rank(script, folder, seed):
        return batch.local_run("ddp", failures.PROGRAM, ["--seed", seed], batch.Shape(1, 1))

    alone = run_check("09.3", lambda b: FIXED, one_rank, seed=41)
    assert alone.message == (
        "expected course_utils.jobs.faulty_ddp on 1 node x 2 ranks, as the script asks, got "
        "course_utils.jobs.faulty_ddp on 1 x 1"
    )

    def no_seed(script, folder, seed):
        return batch.local_run("ddp", failures.PROGRAM, ["--timeout", 20], batch.Shape(1, 2))

    unseeded = run_check("09.3", lambda b: FIXED, no_seed, seed=41)
    assert unseeded.message == (
        "expected rank 0 trained from the check's seed (passed as --seed), got seed 0: pass "
        "the script's arguments on to the program"
    )


def test_09_3_parameter_sums_of_another_run_fail(job_folder, monkeypatch):
    """Lines typed from another run (here: one rank's training) are not the check's."""
    fake, _ = _local_job(lambda seed, shape: _job_output(seed, world_size=1))
    monkeypatch.setattr(batch, "local_run", fake)
    wrong = run_check("09.3", lambda b: FIXED, _run_locally, seed=41)
    assert wrong.verdict == "failed"
    assert wrong.message.startswith("expected rank 0's parameter sum after 3 steps of 2 ranks")
    half, _ = _local_job(lambda seed, shape: _job_output(seed, ranks=(0,)))
    monkeypatch.setattr(batch, "local_run", half)
    assert "those lines from ranks [0]" in run_check("09.3", lambda b: FIXED, _run_locally).message
    failed, _ = _local_job(lambda seed, shape: "rank 1: RuntimeError: boom\n", code=1)
    monkeypatch.setattr(batch, "local_run", failed)
    assert run_check("09.3", lambda b: FIXED, _run_locally).message.startswith(
        "expected the job to end well, got exit code 1: rank 1: RuntimeError: boom"
    )


def _sacct(*rows):
    return "\n".join(
        "|".join([job, name, state, "0:0", "00:00:05", "2", "", "", "00:00:01", "", "1", tasks])
        for job, name, state, tasks in rows
    )


def test_09_3_on_slurm_reads_the_scheduler_record(job_folder, monkeypatch, fake_commands):
    def submitted(path, args=(), **options):
        seed = int(list(args)[list(args).index("--seed") + 1])
        return batch.Job("ddp", "slurm", 0, _job_output(seed), 3.0, "77", "COMPLETED")

    def run_on_slurm(script, folder, seed):
        path = Path(folder) / "repaired.sh"
        path.write_text(script)
        return batch.submit(path, ["--seed", seed], name="ddp", logs=Path(folder))

    monkeypatch.setattr(batch, "submit", submitted)
    records = {
        "good": _sacct(
            ("77", "ddp", "COMPLETED", ""),
            ("77.batch", "batch", "COMPLETED", "1"),
            ("77.0", "python", "COMPLETED", "2"),
        ),
        "one task": _sacct(("77", "ddp", "COMPLETED", ""), ("77.0", "python", "COMPLETED", "1")),
        "none": "",
    }
    for name, record in records.items():
        fake_commands({"sacct": record})
        result = run_check("09.3", lambda b: FIXED, run_on_slurm, seed=5)
        if name == "good":
            assert result.passed, result.message
        elif name == "one task":
            assert result.message == (
                "expected a step of 2 tasks (srun) in sacct, got steps of [1] tasks"
            )
        else:
            assert (
                result.message == "expected sacct's record of job 77, got none (is accounting on?)"
            )


def test_09_3_reference_sum_is_what_ranks_agree_on():
    """The judge's one-process reference changes with the seed and with the number of ranks."""
    sums = {(s, n): harness.trained_sum(s, n) for s in (0, 1) for n in (1, 2)}
    assert len({round(v, 4) for v in sums.values()}) == 4, sums


# ---- 09.4 ----------------------------------------------------------------------------------


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
    assert run_check("09.4", lambda *a: None).message == (
        "12 rows in 4 micro-batches: expected batches of at most 3 rows, got batches of []"
    )
    assert run_check("09.4", stub).verdict == NOT_ATTEMPTED


def test_recorded_logs_show_paths_as_a_learner_reads_them():
    runs = failures.load_runs(failures.RECORDED_RUNS)
    assert len(runs) == 8
    for run in runs:
        assert not re.search(r"/work/|/root/|/home/", run.output), run.name
    assert 'File "course_utils/jobs/faulty_ddp.py", line' in runs[0].output


# ---- 09.5 (the runs: tests/integration/test_failures_memory_runs.py) --------------------------


def _reading(*own_mib, batches=22, checksum=99, yours=True):
    return {
        "batches": batches,
        "checksum": checksum,
        "own_mib": list(own_mib),
        "rows": 256,
        "batch_bytes": 3 * 2**20,
        "yours": yours,
    }


def _report(reading, reported=None, length=22):
    if reported is None:
        reported = {"own_mib": reading["own_mib"], "checksum": reading["checksum"]}
    return {"loader": "DataLoader", "length": length, "reported": reported, "readings": [reading]}


OWN = _reading(10.2, 10.4)  # the judge's own sharing loader


def test_09_5_verdict_on_what_was_measured():
    judge_shared_loader(_report(_reading(12, 13)), OWN, file_sum=99, workers=2)  # passes
    with pytest.raises(CheckFailed, match=r"under 16 MiB more\), got \[75, 12\] MiB: each"):
        judge_shared_loader(_report(_reading(75, 12)), OWN, file_sum=99, workers=2)
    with pytest.raises(CheckFailed, match=r"expected 2 workers reading, got 1"):
        judge_shared_loader(_report(_reading(12)), OWN, file_sum=99, workers=2)
    with pytest.raises(CheckFailed, match=r"one whole epoch .* got 8 of 22 batches"):
        judge_shared_loader(_report(_reading(12, 12, batches=8)), OWN, file_sum=99, workers=2)
    with pytest.raises(CheckFailed, match=r"one whole epoch of the file's images as stored"):
        judge_shared_loader(_report(_reading(12, 12, checksum=7)), OWN, file_sum=99, workers=2)


def test_09_5_a_reading_that_is_not_the_measurement_fails():
    typed = _report(_reading(75, 75), reported={"own_mib": [3.0, 3.0], "checksum": 99})
    with pytest.raises(CheckFailed, match=r"'own_mib': expected what read_loader measured"):
        judge_shared_loader(typed, OWN, file_sum=99, workers=2)
    other = _report(_reading(3, 3, yours=False), reported={"own_mib": [3, 3], "checksum": 99})
    with pytest.raises(CheckFailed, match=r"expected your loader read by job_memory.read_loader"):
        judge_shared_loader(other, OWN, file_sum=99, workers=2)
    with pytest.raises(NotImplementedError, match="run your loader first"):
        judge_shared_loader({**_report(_reading(3, 3)), "reported": None}, OWN, 99, 2)


# ---- held-out cases ------------------------------------------------------------------------


def test_09_4_held_out_cases_fail_chunks_even_only_on_the_visible_sizes(held_out_catches):
    def equal_weights(model, inputs, targets, micro_batches):  # right only when chunks are even
        size = len(inputs) // micro_batches  # 12 // 4 = 3 and 10 // 4 = 2: even on both
        chunks = list(zip(inputs.split(size), targets.split(size)))
        for xs, ys in chunks:
            (nn.functional.mse_loss(model(xs), ys) / len(chunks)).backward()

    failure = held_out_catches("09.4", accumulate_gradients, equal_weights)
    assert re.fullmatch(
        r"\d+ rows in \d micro-batches: expected the big batch's gradients \(relative difference "
        r"< 1e-5\), got a relative difference of .*",
        failure,
    ), failure
