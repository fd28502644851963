import shutil

import nbformat
import pytest

from course_utils.grading.notebooks import ReleaseError, release_notebook, stub_solution
from course_utils.paths import REPO_ROOT
from course_utils.tooling.release import busy_outputs, plan_release, release

ROOT = REPO_ROOT


def test_stub_keeps_indent_and_surrounding_code():
    source = (
        "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n"
    )
    stub = stub_solution(source, "01.1", "add one")
    assert stub == (
        "def f(x):\n    y = 1\n    # Your code here, then run the check cell below.\n"
        '    raise NotImplementedError("Exercise 01.1: add one")'
    )
    assert "return x + y" not in stub


@pytest.mark.parametrize(
    "source, problem",
    [
        ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
        ("x = 1\n### END SOLUTION\n", "without"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "second"),
    ],
)
def test_bad_markers_are_reported(source, problem):
    with pytest.raises(ReleaseError, match=problem):
        stub_solution(source, "01.1", "t")


def _notebook(*cells):
    return nbformat.v4.new_notebook(cells=list(cells))


def _exercise_cell(ex_id, source, does="code"):
    meta = {"exercise": ex_id, "role": "exercise", "points": 1, "does": does}
    return nbformat.v4.new_code_cell(source, metadata={"course": meta})


def test_release_clears_outputs_and_stubs():
    code = nbformat.v4.new_code_cell(
        "print(1)", outputs=[nbformat.v4.new_output("stream", text="1\n")]
    )
    code.execution_count = 3
    ex = _exercise_cell(
        "01.1", "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION"
    )
    student = release_notebook(_notebook(code, ex))
    assert student.cells[0].outputs == [] and student.cells[0].execution_count is None
    assert "NotImplementedError" in student.cells[1].source


def test_exercise_id_must_be_registered():
    ex = _exercise_cell("97.1", "### BEGIN SOLUTION\n### END SOLUTION")
    with pytest.raises(ReleaseError, match="'97.1', which no checker registers"):
        release_notebook(_notebook(ex))


def test_solution_outside_exercise_cell_is_refused():
    cell = nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION")
    with pytest.raises(ReleaseError, match="without exercise metadata"):
        release_notebook(_notebook(cell))


_STUB_01_1 = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION"


def _check_cell(ex_id, source):
    return nbformat.v4.new_code_cell(
        source, metadata={"course": {"exercise": ex_id, "role": "check"}}
    )


def test_a_later_cell_that_calls_a_stub_is_refused():
    later = nbformat.v4.new_code_cell("%matplotlib inline\ny = f(2)")  # magics parse too
    nb = _notebook(
        _exercise_cell("01.1", _STUB_01_1), _check_cell("01.1", "check('01.1', f)"), later
    )
    with pytest.raises(
        ReleaseError, match=r"cell 3 uses f\(\), which exercise 01.1 leaves as a stub"
    ):
        release_notebook(nb)


@pytest.mark.parametrize(
    "later",
    [
        "try:\n    f(2)\nexcept NotImplementedError:\n    print('finish 01.1')",
        "f = abs\nf(2)",  # rebound: no longer the learner's stub
        "from math import fabs as f",
    ],
)
def test_guarded_or_rebound_uses_of_a_stub_are_allowed(later):
    nb = _notebook(
        _exercise_cell("01.1", _STUB_01_1),
        nbformat.v4.new_code_cell(later),
        nbformat.v4.new_code_cell("f(3)"),
    )
    if "except" in later:  # the guard covers its own cell only: the next bare call is refused
        with pytest.raises(ReleaseError, match="cell 3 uses f"):
            release_notebook(nb)
    else:
        release_notebook(nb)


def test_repository_notebooks_are_up_to_date():
    plan = plan_release(ROOT / "solutions", ROOT / "notebooks")
    assert plan.stale == [] and plan.orphans == [], "run `course release`"
    assert len(plan.writes) >= 3


def test_check_detects_stale_and_orphan(tmp_path, capsys):
    solutions, notebooks = tmp_path / "solutions", tmp_path / "notebooks"
    shutil.copytree(ROOT / "solutions", solutions)
    notebooks.mkdir()
    assert release(solutions, notebooks) == 0
    assert release(solutions, notebooks, check_only=True) == 0
    target = sorted(notebooks.glob("*.ipynb"))[0]
    target.write_text(target.read_text().replace("Learning objectives", "Learning goals"))
    (notebooks / "99_old.ipynb").write_text("{}")
    capsys.readouterr()
    assert release(solutions, notebooks, check_only=True) == 1
    out = capsys.readouterr().out
    assert f"stale: {target}" in out and "orphan:" in out and "99_old.ipynb" in out


@pytest.mark.parametrize("does", [None, "fill", ""])
def test_an_exercise_must_say_what_the_learner_does(does):
    cell = _exercise_cell(
        "01.1", "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION"
    )
    if does is None:
        del cell.metadata["course"]["does"]
    else:
        cell.metadata["course"]["does"] = does
    with pytest.raises(ReleaseError, match=r"exercise 01.1: metadata course.does is .*'run'"):
        release_notebook(_notebook(cell))


@pytest.mark.parametrize("does", ["code", "decide", "run"])
def test_each_kind_of_exercise_is_released(does):
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION"
    student = release_notebook(_notebook(_exercise_cell("01.1", source, does)))
    assert student.cells[0].metadata["course"]["does"] == does
    assert "NotImplementedError" in student.cells[0].source


def _with_output(text: str):
    cell = nbformat.v4.new_code_cell("print(timing.cpu_load())")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    return _notebook(nbformat.v4.new_markdown_cell("# 01 t"), cell)


def test_an_output_recorded_above_the_cpu_count_is_named():
    from course_utils.timing import CpuLoad

    busy = str(CpuLoad(7.6, 2, 1.0))  # the lessons' own words for the load
    assert busy_outputs(_with_output(f"median 3 ms\n{busy}\n")) == [
        "cell 1: load average 7.6 on 2 CPUs"
    ]
    assert busy_outputs(_with_output(str(CpuLoad(1.9, 2, 0.0)))) == []
    assert busy_outputs(_with_output(str(CpuLoad(2.0, 2, None)))) == []  # at the count: not above


def test_the_release_check_refuses_a_busy_solution(tmp_path, capsys):
    solutions, notebooks = tmp_path / "solutions", tmp_path / "notebooks"
    solutions.mkdir()
    nbformat.write(
        _with_output("load average 0.3 on 2 CPUs: no contention"), solutions / "01_t.ipynb"
    )
    assert release(solutions, notebooks) == 0
    assert release(solutions, notebooks, check_only=True) == 0
    nbformat.write(
        _with_output("load average 10.2 on 2 CPUs: other work"), solutions / "01_t.ipynb"
    )
    assert release(solutions, notebooks) == 0  # the student copy has no outputs: unchanged
    assert release(solutions, notebooks, check_only=True) == 1
    said = capsys.readouterr().out
    assert "busy: " in said and "01_t.ipynb: cell 1: load average 10.2 on 2 CPUs" in said
