"""accounting: sacct's record parsed, and seff's efficiencies computed from it."""

import pytest

from course_utils import accounting

# What the CI cluster's sacct printed for a 2-node x 2-task job that busy-looped 2 s per task
# (--mem=300M per node, 1 CPU per task), FIELDS in order.
TWO_NODES = """\
2|wrap|COMPLETED|0:0|00:00:02|4|600M||00:04.833|billing=4,cpu=4,mem=600M,node=2|2|
2.batch|batch|COMPLETED|0:0|00:00:02|2||10680K|00:00.019|cpu=2,mem=300M,node=1|1|1
2.0|python3|COMPLETED|0:0|00:00:02|4||42812K|00:04.813|cpu=4,mem=600M,node=2|2|4
"""


def test_sacct_lines_become_steps():
    job, batch, step = accounting.parse_sacct(TWO_NODES)
    assert (job.job_id, job.state, job.exit_code, job.alloc_cpus) == ("2", "COMPLETED", 0, 4)
    assert not job.is_step and batch.is_step and step.tasks == 4
    assert step.max_rss_mb == pytest.approx(42812 / 1024)
    assert step.total_cpu_s == pytest.approx(4.813) and job.alloc_tres["mem"] == "600M"


@pytest.mark.parametrize(
    "text, seconds",
    [("00:00:03", 3), ("01:23.456", 83.456), ("1-02:03:04", 93784), ("", 0), ("12:00", 720)],
)
def test_durations(text, seconds):
    assert accounting.seconds(text) == pytest.approx(seconds)


def test_efficiency_as_seff_computes_it():
    e = accounting.efficiency(accounting.parse_sacct(TWO_NODES))
    assert e.cpu == pytest.approx((4.813 + 0.019) / (2 * 4))  # CPU time over wall x CPUs
    assert e.memory_mb == pytest.approx(42812 / 1024 * 4)  # largest step's MaxRSS x its tasks
    assert e.memory == pytest.approx(e.memory_mb / 600)


def test_a_state_with_a_reason_and_a_failed_exit_code():
    line = "7|x|CANCELLED by 0|0:15|00:01:00|1|2000M||00:00:00|cpu=1,mem=2000M,node=1|1|\n"
    (job,) = accounting.parse_sacct(line)
    assert (job.state, job.exit_code) == ("CANCELLED", 0)
    failed = line.replace("CANCELLED by 0|0:15", "FAILED|3:0")
    assert accounting.parse_sacct(failed)[0].exit_code == 3


def test_job_steps_asks_sacct_and_says_nothing_without_accounting(fake_commands):
    from course_utils import processes

    fake = fake_commands({"sacct": TWO_NODES})
    assert len(accounting.job_steps("2")) == 3 and "-j" in fake.calls[0]
    fake_commands({"sacct": processes.Finished(("sacct",), 1, "", "no accounting", 0.1)})
    assert accounting.job_steps("2") == []


def test_efficiency_needs_the_job_line():
    with pytest.raises(ValueError, match="no job line among the records"):
        accounting.efficiency(accounting.parse_sacct(TWO_NODES)[1:])


def test_a_record_still_being_written_is_read_again_until_it_is_final(fake_commands, monkeypatch):
    """slurmdbd records a job's end a moment after it left the queue: the first reading has
    the job RUNNING and no step, the second the whole record."""
    monkeypatch.setattr(accounting, "SETTLE_POLL", 0)
    readings = iter(["2|wrap|RUNNING|0:0|00:00:01|4|600M||00:00:00|cpu=4|2|\n", TWO_NODES])
    fake = fake_commands({"sacct": lambda command: next(readings)})
    steps = accounting.ended_job_steps("2")
    assert [s.state for s in steps] == ["COMPLETED"] * 3 and len(fake.calls) == 2


def test_a_record_that_never_settles_is_returned_as_it_stands(fake_commands, monkeypatch):
    monkeypatch.setattr(accounting, "SETTLE_POLL", 0)
    fake_commands({"sacct": "2|wrap|COMPLETING|0:0|00:00:01|4|600M||00:00:00|cpu=4|2|\n"})
    [job] = accounting.ended_job_steps("2", wait=0.01)
    assert job.state == "COMPLETING"
    fake_commands({"sacct": ""})
    assert accounting.ended_job_steps("2", wait=0) == []
