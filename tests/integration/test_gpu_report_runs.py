"""gpu_report.run_step with real steps: a Python child that passes, and one killed at its limit."""

import sys

from course_utils.tooling import gpu_report


def test_a_step_past_its_limit_is_killed_and_failed(tmp_path):
    step = gpu_report.Step("sleeper", ["-c", "import time; time.sleep(30)"], timeout=0.5)
    outcome = gpu_report.run_step(step, sys.executable, tmp_path)
    assert not outcome.passed and outcome.detail == "killed after 0.5 s" and outcome.seconds < 5
    ok = gpu_report.run_step(gpu_report.Step("ok", ["-c", "pass"], 30), sys.executable, tmp_path)
    assert ok.passed and ok.detail == ""
