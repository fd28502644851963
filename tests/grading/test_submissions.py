"""grader/submissions: which files are graded, and which notebooks cannot be read (and why)."""

import nbformat
import pytest

from course_utils.grading.grader.submissions import find_submissions, read_notebook
from course_utils.paths import REPO_ROOT


def test_find_submissions_both_layouts(tmp_path):
    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "01_tensors.ipynb").write_text("{}")
    (tmp_path / "ann" / "notes.ipynb").write_text("{}")  # not a lesson: not graded, not reported
    (tmp_path / "ann" / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".hidden__01_tensors.ipynb").write_text("{}")
    (tmp_path / "bo__01_tensors.ipynb").write_text("{}")
    (tmp_path / "bo__02_gpu.ipynb").write_text("{}")
    (tmp_path / "stray.ipynb").write_text("{}")
    (tmp_path / "readme.txt").write_text("")
    subs, skipped = find_submissions(tmp_path, "01")
    assert [(s.learner, s.lesson, s.path.name) for s in subs] == [
        ("ann", "01", "01_tensors.ipynb"),
        ("bo", "01", "bo__01_tensors.ipynb"),
    ]
    assert skipped == [f"skipped {tmp_path / 'stray.ipynb'}: name it <learner>__NN_topic.ipynb"]
    every, _ = find_submissions(tmp_path)
    assert [(s.lesson, s.learner) for s in every] == [("01", "ann"), ("01", "bo"), ("02", "bo")]


def test_one_notebook_per_learner_and_lesson(tmp_path):
    (tmp_path / "cy").mkdir()
    (tmp_path / "cy" / "01_tensors.ipynb").write_text("{}")
    (tmp_path / "cy__01_tensors_v2.ipynb").write_text("{}")
    subs, skipped = find_submissions(tmp_path)
    assert [s.path for s in subs] == [tmp_path / "cy" / "01_tensors.ipynb"]
    assert skipped == [
        f"skipped {tmp_path / 'cy__01_tensors_v2.ipynb'}: 01_tensors.ipynb is graded for cy, "
        "lesson 01 (one notebook per lesson)"
    ]


def test_a_missing_folder_says_what_to_pass(tmp_path):
    with pytest.raises(ValueError, match="does not exist; pass the folder that holds one folder"):
        find_submissions(tmp_path / "nope")


def test_read_notebook_rejects_oversized_and_malformed(tmp_path):
    path = tmp_path / "a.ipynb"
    path.write_text(nbformat.writes(nbformat.read(REPO_ROOT / "solutions" / "01_tensors.ipynb", 4)))
    with pytest.raises(ValueError, match="over the 0 MB limit; clear the outputs"):
        read_notebook(path, max_bytes=100)
    path.write_text('{"cells": [')
    with pytest.raises(
        ValueError, match=r"not a readable notebook \(NotJSONError: .*save it, and resubmit"
    ):
        read_notebook(path)
    path.write_text('{"cells": 3, "nbformat": 4, "nbformat_minor": 5, "metadata": {}}')
    with pytest.raises(ValueError, match="not a readable notebook") as e:
        read_notebook(path)
    assert e.value.__cause__ is not None  # chained: the log shows nbformat's own error


def test_read_notebook_takes_nbformat_3_and_undecodable_bytes(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 'caf\u00e9'")])
    old = tmp_path / "old.ipynb"
    old.write_text(nbformat.writes(nbformat.convert(nb, 3), version=3))
    assert read_notebook(old).cells[0].source == "x = 'caf\u00e9'"
    latin = tmp_path / "latin.ipynb"
    latin.write_bytes(nbformat.writes(nb).replace("\\u00e9", "\u00e9").encode("latin-1"))
    assert read_notebook(latin).cells[0].source == "x = 'caf\ufffd'"  # replaced, not refused
