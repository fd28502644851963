import nbformat
import pytest

from course_utils.tooling.authoring import keep_cell_ids, notebook_to_py, py_to_notebook

SOURCE = """# %% [markdown]
# # Title
# text
# %%
x = 1
# %% course={"exercise": "01.1", "role": "exercise", "points": 1} tags=["nbval-ignore-output"]
def f():
    return x
"""


def test_percent_script_to_notebook():
    nb = py_to_notebook(SOURCE)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code"]
    assert nb.cells[0].source == "# Title\ntext"
    assert nb.cells[2].metadata == {
        "course": {"exercise": "01.1", "role": "exercise", "points": 1},
        "tags": ["nbval-ignore-output"],
    }
    assert nb.metadata["kernelspec"]["name"] == "course"


def test_round_trip_is_stable():
    nb = py_to_notebook(SOURCE)
    again = py_to_notebook(notebook_to_py(nb))
    assert [(c.cell_type, c.source, c.metadata) for c in nb.cells] == [
        (c.cell_type, c.source, c.metadata) for c in again.cells
    ]


def test_bad_header_names_the_text():
    with pytest.raises(ValueError, match="cannot read cell header metadata 'oops'"):
        py_to_notebook("# %% oops\nx = 1\n")


def test_rebuild_keeps_cell_ids(tmp_path):
    target = tmp_path / "nb.ipynb"
    first = py_to_notebook(SOURCE)
    nbformat.write(first, target)
    again = py_to_notebook(SOURCE.replace("x = 1", "x = 2"))
    keep_cell_ids(again, target)
    assert [c.id for c in again.cells] == [c.id for c in first.cells]
