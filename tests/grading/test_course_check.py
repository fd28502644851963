"""grader/learner: `course check NN` grades as `course grade` does, and says so in a few lines.
The runner is replaced by one that answers with records as nbval_record writes them
(tests/integration/test_learner.py runs a real notebook)."""

import nbformat
import pytest
from grading_records import FakeJudge, record, run_of

from course_utils.grading.grader import learner, pipeline
from course_utils.grading.grader.gradebook import ExerciseGrade, SubmissionGrade
from course_utils.grading.runner import nbval_runner
from course_utils.paths import REPO_ROOT

SOLUTION = REPO_ROOT / "solutions" / "01_tensors.ipynb"


def runner_saying(texts, seen, judge=None):
    """A runner whose check cells print `texts[id]` (and whose judge, when given, decided so);
    it keeps the limits it was given."""

    def run_notebook(
        notebook, name, limits, variables=None, sockets=None, announce=None, masked=()
    ):
        if judge is not None:
            judge.said.update({k: v for k, v in texts.items() if v})
        seen.append(limits)
        records = []
        for number, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
            meta = cell.metadata.get("course", {})
            text = texts.get(meta.get("exercise"), "") if meta.get("role") == "check" else ""
            records.append(record(number, text, check=meta.get("exercise")))
        return run_of(*records)

    return run_notebook


def reference_texts():
    nb = nbformat.read(SOLUTION, 4)
    return {
        c.metadata["course"]["exercise"]: c.outputs[0]["text"]
        for c in nb.cells
        if c.metadata.get("course", {}).get("role") == "check"
    }


@pytest.fixture
def judge(monkeypatch):
    fake = FakeJudge()
    monkeypatch.setattr(pipeline, "judge_beside", fake)
    return fake


def test_course_check_runs_without_a_sandbox_and_passes_a_solution(
    tmp_path, monkeypatch, capsys, judge
):
    seen = []
    runner = runner_saying(reference_texts(), seen, judge)
    monkeypatch.setattr(nbval_runner, "run_notebook", runner)
    path = tmp_path / "01_tensors.ipynb"
    path.write_text(SOLUTION.read_text())
    monkeypatch.chdir(REPO_ROOT)
    assert learner.check_lesson("1", path) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"grading {path} as `course grade` does")
    assert out[1] == "lesson 01: 4/4 exercises passing (4/4 points)"
    [limits] = seen
    assert (limits.sandbox, limits.timeout, limits.cell_timeout) == (False, 600, 120)
    assert judge.seeds == [None]  # the learner's own view: the visible cases, no held-out ones


def test_course_check_fails_when_a_check_fails(tmp_path, monkeypatch, capsys, judge):
    texts = reference_texts() | {"01.2": "[01.2] failed: column 0 has mean 3\n"}
    monkeypatch.setattr(nbval_runner, "run_notebook", runner_saying(texts, [], judge))
    path = tmp_path / "01_tensors.ipynb"
    path.write_text(SOLUTION.read_text())
    assert learner.check_lesson("01", path) == 1
    assert "failed: column 0 has mean 3" in capsys.readouterr().out


def test_find_notebook_names_the_option_when_there_is_none(tmp_path):
    (tmp_path / "01_tensors.ipynb").write_text("{}")
    assert learner.find_notebook("01", tmp_path) == tmp_path / "01_tensors.ipynb"
    with pytest.raises(ValueError, match=r"no notebook 02_\*\.ipynb in .*; pass --notebook PATH"):
        learner.find_notebook("02", tmp_path)


def test_report_shows_status_and_notes():
    grade = SubmissionGrade(
        "me",
        "01",
        "x.ipynb",
        "crashed",
        "the kernel died in code cell 3",
        [
            ExerciseGrade("01.1", "flatten", 1, "failed", "not graded"),
            ExerciseGrade("01.2", "scale", 2, "passed", "fine"),
        ],
        notes=["exercise 01.1: 2 cells carry this id"],
    )
    assert learner.report(grade).splitlines() == [
        "lesson 01: 1/2 exercises passing (2/3 points)",
        "  status crashed: the kernel died in code cell 3",
        "  01.1 flatten: failed: not graded [the instructor's grade also runs 1 held-out cases]",
        "  01.2 scale: passed",
        "  note: exercise 01.1: 2 cells carry this id",
    ]
