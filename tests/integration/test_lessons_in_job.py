"""How `make test-in-job` shares the lessons among the ways centres start a server (no job is
submitted here: the lane itself runs them, tests/integration/lessons_in_job.py)."""

from lessons_in_job import deal

OPTIONS = ["--nbval-lax", "--nbval-cell-timeout=600"]
LESSONS = ["notebooks/05_a.ipynb", "notebooks/06_b.ipynb", "notebooks/09_c.ipynb"]
LESSONS += ["notebooks/10_d.ipynb"]


def test_each_lesson_runs_once_and_each_style_gets_one():
    shares = deal(OPTIONS + LESSONS, ["step", "batch-tasks", "batch-cpus"], every_style=False)
    assert shares == {
        "step": OPTIONS + [LESSONS[0], LESSONS[3]],
        "batch-tasks": OPTIONS + [LESSONS[1]],
        "batch-cpus": OPTIONS + [LESSONS[2]],
    }


def test_every_style_runs_every_lesson_when_asked():
    shares = deal(OPTIONS + LESSONS, ["step", "batch-tasks"], every_style=True)
    assert shares == {"step": OPTIONS + LESSONS, "batch-tasks": OPTIONS + LESSONS}


def test_a_style_dealt_no_lesson_submits_no_job():
    styles = ["step", "batch-tasks", "batch-cpus"]
    assert list(deal(OPTIONS + LESSONS[:2], styles, every_style=False)) == styles[:2]
