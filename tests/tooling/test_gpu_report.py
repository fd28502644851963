"""course_utils.tooling.gpu_report: the steps of `make test-gpu` and its one summary table."""

import pytest

from course_utils import processes
from course_utils.paths import REPO_ROOT
from course_utils.tooling import gpu_report


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
    chosen = [s.name for s in gpu_report.plan(["lessons"], lessons=["05", "02"])]
    assert chosen == ["lesson 05_distributed_data_parallel", "lesson 02_cpu_to_gpu"]


def test_an_unknown_lesson_is_refused_with_the_ones_there_are(capsys):
    with pytest.raises(SystemExit) as refused:
        gpu_report.main(["--lessons", "5"], lambda step: None, cuda_available=True)
    assert refused.value.code == 2
    assert "--lessons: ['5'] not among ['00', '01'," in capsys.readouterr().err


def test_report_counts_failures_and_main_exits_by_them(capsys):
    outcomes = {"benchmarks": True, "lesson references": False}

    def runner(step):
        return gpu_report.Outcome(
            step.name, outcomes[step.name], 12.4, "" if outcomes[step.name] else "exit code 1"
        )

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


def test_a_step_past_its_limit_fails_and_its_output_is_shown(fake_commands, capsys, tmp_path):
    def sleeper(command):  # what processes.run returns for a step it killed at its limit
        return processes.Finished(command, None, "collected 3 items\n", "", 0.5)

    fake = fake_commands({"python -c": sleeper, "python -m": "ok\n"})
    step = gpu_report.Step("sleeper", ["-c", "import time; time.sleep(30)"], timeout=0.5)
    outcome = gpu_report.run_step(step, "python", tmp_path)
    assert outcome == gpu_report.Outcome("sleeper", False, 0.5, "killed after 0.5 s")
    ok = gpu_report.run_step(gpu_report.Step("ok", ["-m", "pytest"], 30), "python", tmp_path)
    assert ok.passed and ok.detail == ""
    assert fake.timeouts == [0.5, 30]
    out = capsys.readouterr().out
    assert "== ok: python -m pytest\nok\n" in out  # the step's lines, shown as they came


def test_a_failed_step_says_how_it_ended(fake_commands, tmp_path):
    crashed = processes.Finished(("python",), -11, "", "", 2.0)
    fake_commands({"python": crashed})
    outcome = gpu_report.run_step(gpu_report.Step("lesson 07", ["-m", "x"], 60), "python")
    assert outcome == gpu_report.Outcome("lesson 07", False, 2.0, "signal 11 (SIGSEGV)")


def test_a_budget_shrinks_the_limits_and_lists_the_steps_it_leaves_out():
    clock = iter([0.0, 0.0, 100.0, 250.0]).__next__  # start, then before each of three steps
    ran = []

    def runner(step):
        ran.append((step.name, step.timeout))
        return gpu_report.Outcome(step.name, True, 1.0)

    steps = [gpu_report.Step(name, ["-m", name], 200) for name in ("a", "b", "c")]
    outcomes = gpu_report.run_within(steps, 280, runner, clock)
    assert ran == [("a", 200), ("b", 180)]  # b gets the 180 s left of 280, c too few to start
    assert outcomes[2] == gpu_report.Outcome("c", False, 0.0, "not run: --budget 280 s spent")
    assert gpu_report.run_within(steps, None, runner) and ran[-1] == ("c", 200)
