"""grader/pipeline: a submission's file in, its grade out, with the runner replaced by one that
answers with records as nbval_record writes them (no notebook runs here)."""

import pathlib

import nbformat
import pytest
from grading_records import FakeJudge, record, run_of

from course_utils.grading.exercises import registry
from course_utils.grading.grader import gradebook, pipeline
from course_utils.grading.grader.plan import Lesson
from course_utils.grading.grader.submissions import Submission
from course_utils.grading.runner import leftovers, nbval_runner
from course_utils.grading.runner.limits import Limits
from course_utils.paths import REPO_ROOT, SANITIZE_FILE

SOLUTION = REPO_ROOT / "solutions" / "01_tensors.ipynb"
EXERCISES = ("01.1", "01.2", "01.3", "01.4")
LIMITS = Limits(timeout=60, cell_timeout=10, sandbox=False)


@pytest.fixture(scope="module")
def lesson():
    return Lesson.load("01", REPO_ROOT / "solutions")


class FakeRunner:
    """Stands in for `nbval_runner.run_notebook`: every code cell ran; each check cell printed
    what `said` gives for its exercise (the reference's own text when not given), and the judge
    (`judge`, a FakeJudge put in for the judge process) decided what the check printed."""

    def __init__(self, lesson, said=None, log="pytest said this\n", judge=None):
        self.lesson, self.said, self.log, self.calls = lesson, said or {}, log, []
        self.sockets, self.judge = [], judge

    def __call__(
        self, notebook, name, limits, variables=None, sockets=None, announce=None, masked=()
    ):
        self.calls.append((notebook, name, limits))
        self.sockets.append(sockets)
        records = []
        for number, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
            meta = cell.metadata.get("course", {})
            if meta.get("role") == "check":
                ex_id = meta["exercise"]
                text = self.said.get(ex_id, self.lesson.reference[ex_id][0]["text"])
                records.append(record(number, text, check=ex_id))
                if self.judge is not None:
                    self.judge.said[ex_id] = text
            else:
                records.append(record(number))
        run = run_of(*records)
        run.log = self.log
        return run


@pytest.fixture
def judge(monkeypatch):
    fake = FakeJudge()
    monkeypatch.setattr(pipeline, "judge_beside", fake)
    return fake


def submit(tmp_path, nb, name="ann__01_tensors.ipynb"):
    path = tmp_path / name
    path.write_text(nb if isinstance(nb, str) else nbformat.writes(nb))
    return path


def test_a_full_submission_earns_every_point_and_keeps_its_log(
    tmp_path, monkeypatch, lesson, judge
):
    runner = FakeRunner(lesson, judge=judge)
    monkeypatch.setattr(nbval_runner, "run_notebook", runner)
    path = submit(tmp_path, nbformat.read(SOLUTION, 4))
    grade = pipeline.grade_notebook(path, lesson, LIMITS, "ann", SANITIZE_FILE, tmp_path / "logs")
    assert (grade.learner, grade.lesson, grade.source) == ("ann", "01", str(path))
    assert (grade.total, grade.max_total, grade.status, grade.reason) == (4, 4, "ok", "")
    assert grade.sandbox == "none" and grade.seconds > 0
    assert [e.title for e in grade.exercises] == [registry()[i].title for i in EXERCISES]
    assert (tmp_path / "logs" / "ann__01.log").read_text() == "pytest said this\n"
    [(notebook, name, limits)] = runner.calls
    assert name == "01_grading.ipynb" and limits is LIMITS
    assert all(c.get("outputs", []) == [] for c in notebook.cells)  # no reference goes in
    door = pathlib.Path("/nonexistent/judge.sock")
    assert runner.sockets == [{"COURSE_JUDGE": door, "COURSE_WITNESS": door}]
    assert judge.seeds == [None]  # no seed: no held-out cases


def test_what_the_run_printed_earns_nothing_the_judge_decides(tmp_path, monkeypatch, lesson, judge):
    """A notebook whose check cells print the reference's lines (a replaced print, a hooked
    cell) but whose answers the judge failed gets no point; a passed verdict needs both."""
    monkeypatch.setattr(nbval_runner, "run_notebook", FakeRunner(lesson, judge=judge))
    judge.overrule = {
        "01.1": {"exercise": "01.1", "verdict": "failed", "message": "expected shape (8, 48)"},
        "01.4": {"exercise": "01.4", "verdict": "not attempted yet", "message": "stub"},
    }
    grade = pipeline.grade_notebook(submit(tmp_path, nbformat.read(SOLUTION, 4)), lesson, LIMITS)
    points = {e.exercise_id: e.points for e in grade.exercises}
    assert points == {"01.1": 0, "01.2": 1, "01.3": 1, "01.4": 0}
    assert grade.exercises[0].message == "expected shape (8, 48)"


def test_a_check_that_never_reached_the_judge_earns_nothing(tmp_path, monkeypatch, lesson, judge):
    monkeypatch.setattr(nbval_runner, "run_notebook", FakeRunner(lesson))  # no verdicts at all
    grade = pipeline.grade_notebook(submit(tmp_path, nbformat.read(SOLUTION, 4)), lesson, LIMITS)
    assert grade.total == 0
    assert grade.exercises[0].message.startswith("the check never reached the judge")


def test_a_check_that_prints_more_than_the_reference_fails(tmp_path, monkeypatch, lesson, judge):
    said = {"01.2": "debug\n" + lesson.reference["01.2"][0]["text"]}
    monkeypatch.setattr(nbval_runner, "run_notebook", FakeRunner(lesson, said, judge=judge))
    grade = pipeline.grade_notebook(submit(tmp_path, nbformat.read(SOLUTION, 4)), lesson, LIMITS)
    assert grade.learner == "ann__01_tensors"  # the file's name when no learner is given
    points = {e.exercise_id: e.points for e in grade.exercises}
    assert points == {"01.1": 1, "01.2": 0, "01.3": 1, "01.4": 1}
    assert "your code printed or warned during the check: 'debug'" in grade.exercises[1].message


def test_an_unreadable_notebook_is_graded_zero_without_a_run(tmp_path, monkeypatch, lesson):
    runner = FakeRunner(lesson)
    monkeypatch.setattr(nbval_runner, "run_notebook", runner)
    path = submit(tmp_path, nbformat.writes(nbformat.read(SOLUTION, 4))[:-200])
    grade = pipeline.grade_notebook(path, lesson, LIMITS, "ann", logs=tmp_path / "logs")
    assert (grade.status, grade.total, grade.max_total) == (gradebook.UNREADABLE, 0, 4)
    assert grade.reason.startswith("not a readable notebook (NotJSONError")
    assert {e.message for e in grade.exercises} == {"not graded: the notebook could not be read"}
    assert grade.exercises[3].title == registry()["01.4"].title
    assert runner.calls == [] and not (tmp_path / "logs").exists()


def test_grade_all_costs_one_row_for_a_grader_failure(tmp_path, monkeypatch, lesson, judge):
    monkeypatch.setattr(nbval_runner, "run_notebook", FakeRunner(lesson, judge=judge))
    good = Submission("ann", "01", submit(tmp_path, nbformat.read(SOLUTION, 4)))
    unknown = Submission("bo", "02", tmp_path / "bo__02_gpu.ipynb")  # no lesson 02 was loaded
    grades = pipeline.grade_all([good, unknown], {"01": lesson}, LIMITS, jobs=2, progress=False)
    by_learner = {g.learner: g for g in grades}
    assert (by_learner["ann"].status, by_learner["ann"].total) == ("ok", 4)
    assert by_learner["bo"].status == gradebook.ERROR
    assert by_learner["bo"].reason == "the grader failed: KeyError: '02'"


def test_grade_all_interrupted_leaves_no_run_behind(tmp_path, monkeypatch, lesson):
    ended = []

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "grade_notebook", interrupted)
    monkeypatch.setattr(leftovers, "kill_running", lambda: ended.append(True))
    sub = Submission("ann", "01", tmp_path / "x.ipynb")
    with pytest.raises(KeyboardInterrupt):
        pipeline.grade_all([sub], {"01": lesson}, LIMITS, progress=False)
    assert ended == [True]
