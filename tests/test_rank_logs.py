"""course_utils.rank_logs: the failing rank's own words, from a launch's output and its logs."""

from pathlib import Path

from course_utils import rank_logs

ASSETS = Path(__file__).parent / "assets"


def test_failure_cause_finds_the_failing_ranks_own_error_in_a_real_gpu_log():
    # lesson 05 on a 1-GPU node before the fix (2 ranks, nccl): the cause is in rank 0's lines,
    # not in torchrun's summary
    log = (ASSETS / "ddp_train-2-ranks-1-gpu.log").read_text()
    cause = rank_logs.failure_cause(log)
    assert cause.startswith("cause (rank 0): torch.distributed.DistBackendError")
    assert cause.endswith("Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60")
    assert "destroy_process_group" not in cause  # a later warning, not the error


TORN_TRACEBACKS = """\
Traceback (most recent call last):
Traceback (most recent call last):
  File "/course/jobs/ddp_exercise.py", line 40, in main
  File "/course/jobs/ddp_exercise.py", line 40, in main
        trained = unwrap_model(load_answer(answer)(model, dataset))
trained = unwrap_model(load_answer(answer)(model, dataset))
                           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/tmp/answer.py", line 3, in broken
    raise RuntimeError("my loader is missing")
RuntimeError: my loader is missing
                           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/tmp/answer.py", line 3, in broken
    raise RuntimeError("my loader is missing")
RuntimeError: my loader is missing
E1123 14:58:53.116000 15668 torch/distributed/elastic/multiprocessing/api.py:1002] failed
"""


def test_failure_cause_reads_through_tracebacks_two_ranks_tore_apart():
    # Two ranks' unbuffered tracebacks in one pipe: rank 1 wrote a whole line between rank 0's
    # indent and its source line, leaving a source line at the start of a line (seen in CI).
    cause = rank_logs.failure_cause(TORN_TRACEBACKS)
    assert cause == "cause (the program): RuntimeError: my loader is missing"


def test_failure_cause_without_a_traceback_reports_the_signal():
    summary = "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n"
    summary += "  exitcode  : -11 (pid: 1)\n"
    assert rank_logs.failure_cause(summary) == (
        "cause: rank 1 was killed by signal 11 (no Python traceback)"
    )
    assert rank_logs.failure_cause("all fine\n") is None


SUMMARY = """\
Root Cause (first observed failure):
[0]:
  time      : 2026-11-25_19:55:20
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : {code} (pid: 6659)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
"""


def test_a_rank_that_gave_up_with_sys_exit_is_quoted_from_its_own_lines():
    # measured: rank 1 calls sys.exit("...") after joining; torchrun's summary says only
    # "To enable traceback see: ...", the message is in rank 1's own stderr
    own = {0: "rank 0 joined\n", 1: "rank 1 joined\nrank 1 gives up: no data in /scratch\n"}
    output = "rank 0 joined\nrank 1 joined\nrank 1 gives up: no data in /scratch\n"
    cause = rank_logs.failure_cause(output + SUMMARY.format(code=1), own)
    assert cause == (
        "cause: rank 1 exited with code 1 without a Python traceback; its last lines:\n"
        "  rank 1 joined\n  rank 1 gives up: no data in /scratch"
    )


def test_a_cpp_abort_shows_the_ranks_last_lines_and_the_signal():
    own = {1: "terminate called after throwing an instance of 'c10::Error'\n  what():  boom\n"}
    cause = rank_logs.failure_cause(SUMMARY.format(code=-6), own)
    assert cause.startswith("cause: rank 1 was killed by signal 6 without a Python traceback")
    assert "terminate called after throwing an instance of 'c10::Error'" in cause
    assert "what():  boom" in cause


def test_a_traceback_in_the_ranks_own_output_is_its_cause():
    own = {
        1: '[rank1]: Traceback (most recent call last):\n[rank1]:   File "x.py", line 1\n'
        "[rank1]: ValueError: bad shape\n"
    }
    assert (
        rank_logs.failure_cause(SUMMARY.format(code=1), own)
        == "cause (rank 1): ValueError: bad shape"
    )


def test_a_silent_rank_killed_by_a_signal_says_so():
    cause = rank_logs.failure_cause(SUMMARY.format(code=-9), {1: "", 0: "fine\n"})
    assert cause == "cause: rank 1 was killed by signal 9 (no Python traceback)"
    cause = rank_logs.own_cause("rank 1", -9, "")
    assert (
        cause
        == "cause: rank 1 was killed by signal 9 (no Python traceback, and it printed nothing)"
    )


def test_tee_prefixes_are_stripped_once():
    assert rank_logs.strip_tee_prefix("[default1]:[rank1]: boom\n") == "[rank1]: boom\n"
    assert rank_logs.strip_tee_prefix("plain [default1]: line") == "plain [default1]: line"


def test_rank_outputs_reads_torchruns_log_folder_last_attempt_wins(tmp_path):
    for attempt, text in ((0, "first try"), (1, "second try")):
        for rank in (0, 1):
            folder = tmp_path / "run-id" / f"attempt_{attempt}" / str(rank)
            folder.mkdir(parents=True)
            (folder / "stdout.log").write_text(f"{text} out {rank}\n")
            (folder / "stderr.log").write_text(f"{text} err {rank}\n")
    assert rank_logs.rank_outputs(tmp_path) == {
        0: "second try out 0\nsecond try err 0\n",
        1: "second try out 1\nsecond try err 1\n",
    }
    assert rank_logs.rank_outputs(tmp_path / "missing") == {}
