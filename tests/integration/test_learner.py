"""`course check NN`: the learner sees the verdicts the instructor's `course grade` will give."""

import nbformat
import pytest

from course_utils.cli import main
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT


@pytest.mark.slow  # a lesson checked and graded: about 20 s
def test_course_check_grades_like_the_grader(tmp_path, capsys, monkeypatch):
    """A wrong answer, and an answer that prints during its check (nbval fails it, so must we)."""
    nb = nbformat.read(REPO_ROOT / "solutions" / "01_tensors.ipynb", as_version=4)
    answers = {
        "01.3": "def to_numpy(t):\n    return t.detach().clone().numpy()",
    }
    solved = next(
        c.source
        for c in nb.cells
        if course_meta(c) == {**course_meta(c), "exercise": "01.2", "role": "exercise"}
    )
    head = "def broadcast_vs_loop(x):\n"
    answers["01.2"] = solved.replace(head, head + "    print('debug')\n")
    for cell in nb.cells:
        meta = course_meta(cell)
        if meta.get("role") == "exercise" and meta["exercise"] in answers:
            cell.source = answers[meta["exercise"]]
    nb.cells = nb.cells[::-1]  # order does not matter: cells are matched by exercise id
    path = tmp_path / "01_tensors.ipynb"
    nbformat.write(nb, path)
    monkeypatch.chdir(REPO_ROOT)
    assert main(["check", "1", "--notebook", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "lesson 01: 2/4 exercises passing (2/4 points)"
    assert out[2] == (
        "  01.1 flatten a batch without copying, and measure what a copy costs: passed "
        "[the instructor's grade also runs 1 held-out cases]"
    )
    assert out[3].startswith(
        "  01.2 standardize columns with broadcasting, measured against a loop: "
        "failed: the check passed, but the check cell's output differs"
    )
    assert out[4].startswith("  01.3 a tensor to NumPy, safely: failed: ")
    assert out[4].endswith("got a copy (use .numpy())")
