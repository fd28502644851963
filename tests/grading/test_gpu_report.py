"""course_utils.grading.gpu_report: the steps of `make test-gpu` and its one summary table."""

import sys

from course_utils.grading import gpu_report
from course_utils.paths import REPO_ROOT


def test_plan_runs_benchmarks_references_gpu_tests_and_every_lesson():
    steps = gpu_report.plan()
    names = [s.name for s in steps]
    lessons = sorted(p.stem for p in (REPO_ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    assert names[:3] == ["benchmarks", "lesson references", "tests marked gpu"]
    assert names[3:] == [f"lesson {stem}" for stem in lessons] and len(lessons) >= 9
    lesson = steps[3]
    assert "course_utils.grading.runner.kernel_watch" in lesson.argv
    assert "--nbval-lax" in lesson.argv
    assert gpu_report.plan(["lessons"])[0].name == "lesson 00_setup"


def test_report_counts_failures_and_main_exits_by_them(capsys):
    outcomes = {"benchmarks": True, "lesson references": False}

    def runner(step):
        return gpu_report.Outcome(step.name, outcomes[step.name], 12.4, "" if outcomes[step.name]
                                  else "exit code 1")  # fmt: skip

    code = gpu_report.main(["--steps", "benchmarks,references"], runner, cuda_available=True)
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0].split() == ["step", "result", "seconds", "detail"]
    assert out[1].split() == ["benchmarks", "passed", "12"]
    assert out[2].split() == ["lesson", "references", "FAILED", "12", "exit", "code", "1"]
    assert out[3] == "2 steps, 1 failed"


def test_main_refuses_without_a_gpu(capsys):
    assert gpu_report.main([], lambda step: None, cuda_available=False) == 2
    assert "needs a CUDA GPU and found none" in capsys.readouterr().err


def test_a_step_past_its_limit_is_killed_and_failed(tmp_path):
    step = gpu_report.Step("sleeper", ["-c", "import time; time.sleep(30)"], timeout=0.5)
    outcome = gpu_report.run_step(step, sys.executable, tmp_path)
    assert not outcome.passed and outcome.detail == "killed after 0.5 s" and outcome.seconds < 5
    ok = gpu_report.run_step(gpu_report.Step("ok", ["-c", "pass"], 30), sys.executable, tmp_path)
    assert ok.passed and ok.detail == ""
