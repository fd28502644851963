"""Lesson 09's failures, provoked for real: each ends within its timeouts, is diagnosed with the
real tools (py-spy, the flight recorder), and leaves no process behind. The checks of 09.2 and
09.3 on the learner's own runs (real forked ranks, a job on local ranks), forged runs included."""

import time
from functools import partial
from pathlib import Path

import nbformat
import pytest
import torch
import torch.distributed as dist

from course_utils import batch, launching, sbatch
from course_utils.failing import failures, flight_recorder, memory, stacks
from course_utils.grading import NOT_ATTEMPTED, run_check
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT


@pytest.fixture(autouse=True)
def no_process_left_behind():
    yield
    assert [p.cmdline() for p in failures.leftover_processes()] == []


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A hang on rank 1 (stacks, flight records) and rank 0 never joining, side by side."""
    folder = tmp_path_factory.mktemp("failures")
    record = {"TORCH_FR_BUFFER_SIZE": "64", "TORCH_FR_DUMP_TEMP_FILE": str(folder / "fr" / "rank_")}
    start = time.perf_counter()
    found = failures.provoke_all(
        {
            "hang": dict(faulty_rank=1, timeout=4, take_stacks=True, env=record),
            "never-joins": dict(faulty_rank=0, timeout=3),
        },
        folder,
    )
    return found, folder, time.perf_counter() - start


def test_the_runs_end_within_their_timeouts(runs):
    found, _, seconds = runs
    assert all(run.returncode != 0 for run in found.values())
    assert seconds < 60  # the launcher's own limit is 90 s: the job's timeouts ended them


def test_py_spy_shows_where_each_rank_of_a_hang_is(runs):
    hang = runs[0]["hang"]
    assert sorted(hang.stacks) == [0, 1], hang.output
    waiting, stalled = (stacks.frames(hang.stacks[r]) for r in (0, 1))
    assert waiting[0] == "all_reduce" and "average_gradients" in waiting
    assert stalled[:2] == ["stall", "load_next_batch"]
    assert failures.root_cause_rank(hang.output) == 0  # torchrun blames the rank that waited


def test_flight_records_name_the_missing_rank(runs):
    folder = runs[1] / "fr"
    last = flight_recorder.last_collectives(flight_recorder.flight_records(folder))
    assert last == {0: "#3 all_reduce [[1, 16]]", 1: "#2 all_reduce [[1]]"}
    report, route = flight_recorder.analyse_flight_records(folder, world_size=2)
    assert "missing ranks: {1}" in report, report
    assert route.startswith("the analyser read") or route.startswith("the dumps' group name")


def test_a_rank_that_never_joins(runs):
    run = runs[0]["never-joins"]
    assert (run.faulty_rank, run.cause) == (0, "never joined")
    assert "rank 1: not all 2 processes joined within 3 s" in run.output


def _mismatched(rank, world_size):
    grads = torch.ones(4)
    if rank == 0:
        dist.broadcast(grads, src=0)
    else:
        dist.all_reduce(grads)


def test_forked_ranks_name_a_mismatch_with_detail():
    with pytest.raises(launching.RanksFailed, match="OpType=BROADCAST") as e:
        launching.run_ranks(_mismatched, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
    assert "TensorDeviceTypes" not in str(e.value)  # shortened


def test_forked_ranks_that_never_return_are_killed():
    start = time.perf_counter()
    with pytest.raises(launching.RanksFailed, match="rank 1: did not finish within 1 s"):
        launching.run_ranks(lambda rank, size: time.sleep(60 * rank), timeout=1)
    assert time.perf_counter() - start < 15


def log_mean_loss(loss, rank, world_size):
    total = torch.tensor([loss])
    dist.all_reduce(total)
    return total.item() / world_size if rank == 0 else None


def run_step(losses, step=log_mean_loss, world_size=None):
    def on_rank(rank, size):
        return step(losses[rank], rank, size)

    return launching.run_ranks(on_rank, world_size or len(losses), timeout=3.0)


def test_checker_09_2_reads_the_learners_own_run_on_real_ranks():
    assert run_check("09.2", run_step).passed

    def only_rank_0_reduces(loss, rank, world_size):  # the broken step: rank 0 waits in vain
        return log_mean_loss(loss, rank, world_size) if rank == 0 else None

    hangs = run_check("09.2", partial(run_step, step=only_rank_0_reduces))
    assert hangs.verdict == "failed"
    assert hangs.message.startswith(
        "2 ranks with losses the check drew: expected every rank to finish within the run's "
        "timeout, got rank 0"
    )
    assert "Timed out" in hangs.message and "all_reduce on every rank" in hangs.message

    def stub(loss, rank, world_size):
        raise NotImplementedError("Exercise 09.2")

    assert run_check("09.2", partial(run_step, step=stub)).verdict == NOT_ATTEMPTED


def test_checker_09_2_fails_ranks_that_answer_without_the_collective_or_too_few():
    """A rank that returns the expected mean from what the kernel handed it, without a
    collective: the ranks' flight records show no all_reduce."""

    def from_the_closure(losses):
        mean = sum(losses) / len(losses)
        return launching.run_ranks(lambda rank, size: mean if rank == 0 else None, len(losses))

    closure = run_check("09.2", from_the_closure)
    assert closure.verdict == "failed"
    assert "every rank entering the same collectives (all_reduce)" in closure.message
    two_only = run_check("09.2", partial(run_step, world_size=2))
    assert two_only.message.startswith("3 ranks with losses the check drew: expected 3 ranks")


def test_peak_memory_of_accumulation_and_checkpointing():
    shape = memory.StepShape()  # the lesson's: 16 layers of 4096 x 128 float32 (2 MiB each)
    saved = shape.depth * shape.batch * shape.width * 4
    peaks = memory.measure_cpu(shape)
    big = peaks["big batch"]["peak_bytes"]
    # The big batch holds every saved activation; the measurement is the step's tensors, not
    # library pages (those once added 11 to 35 MiB, depending on the page cache).
    assert 0.9 * saved < big < 1.5 * saved, peaks
    assert peaks["accumulation"]["peak_bytes"] < 0.5 * big, peaks  # a quarter of the batch
    assert peaks["checkpointing"]["peak_bytes"] < 0.75 * big, peaks  # 3 inputs + 1 segment
    for name in ("accumulation", "checkpointing"):
        assert peaks[name]["max_rel_diff"] < 1e-6, peaks


def test_forked_ranks_from_inside_a_job_form_a_group_of_their_own(monkeypatch):
    # a kernel inside a Slurm job with stale torchrun variables: the ranks still join each other
    for name, value in {
        "SLURM_JOB_ID": "9",
        "SLURM_NTASKS": "4",
        "SLURM_PROCID": "0",
        "RANK": "3",
        "WORLD_SIZE": "2",
        "MASTER_PORT": "1",
    }.items():
        monkeypatch.setenv(name, value)

    def who(rank, size):
        import os

        return rank, size, os.environ.get("SLURM_NTASKS"), os.environ.get("RANK")

    assert launching.run_ranks(who, timeout=20) == [(0, 2, None, None), (1, 2, None, None)]


# ---- 09.3 on local ranks (submitted to Slurm: test_failures_slurm.py) ------------------------


def solution(exercise: str) -> dict:
    """The names the solution's exercise cell defines (with the notebook's imports it uses)."""
    nb = nbformat.read(REPO_ROOT / "solutions" / "09_when_jobs_fail.ipynb", as_version=4)
    cell = next(c for c in nb.cells if course_meta(c).get("exercise") == exercise)
    namespace = {"batch": batch, "failures": failures, "sbatch": sbatch, "Path": Path}
    exec(cell.source, namespace)
    return namespace


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COURSE_LAUNCHER", "local")
    return tmp_path


def test_checker_09_3_runs_the_learners_job_on_local_ranks(here):
    answer = solution("09.3")
    done = run_check("09.3", answer["repaired_script"], answer["run_repaired"], seed=12345)
    assert done.passed, done.message
    job = answer["run_repaired"](failures.BROKEN_BATCH_SCRIPT, str(here), 12345)
    sums = {line.split(",")[-1] for line in job.output.splitlines() if "finished" in line}
    assert len(sums) == 1, job.output  # both ranks end with the same parameters


def test_checker_09_3_fails_a_job_of_one_rank_and_a_rank_that_only_prints_the_line(
    here, monkeypatch
):
    answer = solution("09.3")

    def alone(script, folder, seed):  # the batch script's python: one process, not two ranks
        options = ["--timeout", 20, "--seed", seed]
        return batch.local_run("alone", failures.PROGRAM, options, batch.Shape(1, 1))

    one = run_check("09.3", answer["repaired_script"], alone, seed=7)
    assert one.message.endswith("got course_utils.jobs.faulty_ddp on 1 x 1"), one.message

    # A program of the learner's own that prints what a healthy rank prints, and exits.
    (here / "fake_rank.py").write_text(
        "import os\n"
        "from course_utils.grading.checks import lesson09_references as h\n"
        "if __name__ == '__main__':  # the fork server imports it first\n"
        "    seed = int(os.environ['SEED'])\n"
        "    total = h.trained_sum(seed, 2)\n"
        "    print(f\"rank {os.environ['RANK']}: finished, seed {seed}, \"\n"
        '          f"parameter sum {total:.6f}")\n'
    )
    monkeypatch.syspath_prepend(str(here))

    def printer(script, folder, seed):
        environ = {"SEED": str(seed)}
        return batch.local_run("fake", "fake_rank", [], batch.Shape(1, 2), environ=environ)

    assert printer("", str(here), 7).output.count("parameter sum") == 2  # it does print them
    fake = run_check("09.3", answer["repaired_script"], printer, seed=7)
    assert fake.verdict == "failed"
    assert fake.message.endswith("got fake_rank on 1 x 2"), fake.message
