"""A learner's function as a job they submit (answer_jobs): the files written, the command line
printed, the function loaded back by the program; a stub writes nothing."""

import shlex

import pytest

from course_utils import answer_jobs, cpu_sweep
from course_utils.paths import REPO_ROOT


def thread_rates(step, batch_size):
    return {1: 100.0}


def stub(step, batch_size):
    raise NotImplementedError("Exercise 02.2: sweep")


@pytest.mark.parametrize("job", [answer_jobs.THREAD_SWEEP, answer_jobs.BOTTLENECK])
def test_the_script_is_the_header_then_one_srun_of_the_program(job):
    script = job.script()
    assert script.startswith("#!/bin/bash\n#SBATCH") and script.endswith("\n")
    assert 'source "$COURSE_DIR/slurm/config.sh"' in script
    assert script.splitlines()[-1] == (
        f'srun -c "$SLURM_CPUS_PER_TASK" python -m {job.program} "$@"'
    )


def test_write_leaves_the_script_and_the_function_and_prints_the_command(tmp_path):
    line = answer_jobs.write(answer_jobs.THREAD_SWEEP, thread_rates, tmp_path / "job")
    words = shlex.split(line)
    script = tmp_path / "job" / "02.2-job.sh"
    assert words[:4] == [
        "sbatch",
        "--parsable",
        f"--export=ALL,COURSE_DIR={REPO_ROOT}",
        str(script),
    ]
    assert script.read_text() == answer_jobs.THREAD_SWEEP.script()
    answer = words[words.index("--answer") + 1]
    assert words[words.index("--digest") + 1] == answer_jobs.answer_digest(thread_rates)
    loaded = answer_jobs.load(answer, "thread_rates")
    assert loaded(None, 256) == {1: 100.0}


def test_a_stub_writes_nothing_and_says_what_to_write(tmp_path):
    with pytest.raises(NotImplementedError, match=r"write thread_rates \(02.2\) first"):
        answer_jobs.write(answer_jobs.THREAD_SWEEP, stub, tmp_path / "job")
    assert not (tmp_path / "job").exists()


def test_load_names_what_is_missing(tmp_path):
    module = tmp_path / "other.py"
    module.write_text("def something_else():\n    pass\n")
    with pytest.raises(ValueError, match="defines no function thread_rates"):
        answer_jobs.load(module, "thread_rates")
    with pytest.raises(ValueError, match="not a Python module file"):
        answer_jobs.load(tmp_path / "rates.txt", "thread_rates")


def test_rates_round_trip_and_bad_text_is_named():
    assert cpu_sweep.parse_rates(cpu_sweep.rates_text({2: 1490.04, 1: 812.4})) == {
        1: 812.4,
        2: 1490.0,
    }
    with pytest.raises(ValueError, match="'fast' is not a sweep's rates"):
        cpu_sweep.parse_rates("fast")
