"""The programs of 02.2's and 08.3's jobs (answer_jobs) on a learner's function, in this
process: what they print and leave for sacct, and the answers they refuse. Their runs as real
Slurm jobs are tests/integration/test_grader_class.py's."""

import pytest

from course_utils import witness
from course_utils.jobs import bottleneck_job, thread_sweep


@pytest.fixture
def left(monkeypatch) -> list[str]:
    """What a program leaves for sacct (witness.to_job_record), kept here instead."""
    kept: list[str] = []
    monkeypatch.setattr(witness, "to_job_record", kept.append)
    return kept


def _answer(tmp_path, source: str):
    path = tmp_path / "answer.py"
    path.write_text(source)
    return str(path)


def test_the_sweep_prints_each_count_s_median_and_leaves_the_rates(tmp_path, capsys, left):
    """The learner's sweep runs SWEEPS times; the second here had its 1-thread run slowed."""
    answer = _answer(
        tmp_path,
        "calls = []\n"
        "def thread_rates(step, batch_size):\n"
        "    step()\n"
        "    calls.append(1)\n"
        "    return {1: 300.0 if len(calls) == 2 else 800.0 + len(calls), 2: 1500.0}\n",
    )
    assert thread_sweep.SWEEPS == 3
    assert thread_sweep.main(["--answer", answer, "--digest", "d1"]) == 0
    said = capsys.readouterr().out
    assert "the median of 3 sweeps of your thread_rates" in said
    assert "1 thread(s):      801 images/s" in said and "2 thread(s):    1,500 images/s" in said
    assert left == ["digest d1 rates 1:801.0,2:1500.0"]


def test_the_sweep_refuses_what_is_not_rates(tmp_path, capsys, left):
    answer = _answer(tmp_path, "def thread_rates(step, batch_size):\n    return [800.0]\n")
    assert thread_sweep.main(["--answer", answer, "--digest", "d1"]) == 1
    assert "expected {threads: images per second}" in capsys.readouterr().out
    assert left == []


def test_the_bottleneck_job_needs_the_trace_it_names(tmp_path, capsys, left):
    answer = _answer(
        tmp_path,
        "def name_the_bottleneck(model, loader, optimizer, trace_path):\n    return 'compute'\n",
    )
    assert bottleneck_job.main(["--answer", answer, "--digest", "d1"]) == 1
    assert "the compute-bound job: no trace at trace_path" in capsys.readouterr().out
    assert left == []
