"""grader/plan: the grading notebook is the release with only the learner's exercise cells in it.

Built from lesson 01's solutions/ (as `course grade` builds it); nothing runs here.
"""

import nbformat
import pytest

from course_utils.grading.grader import plan as plans
from course_utils.grading.grader.plan import FRESH_CHECK, Lesson, build_grading_notebook
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT

SOLUTIONS = REPO_ROOT / "solutions"


@pytest.fixture(scope="module")
def lesson():
    return Lesson.load("01", SOLUTIONS)


def solution():
    return nbformat.read(SOLUTIONS / "01_tensors.ipynb", as_version=4)


def cell(nb, exercise, role="exercise"):
    return next(
        c
        for c in nb.cells
        if (course_meta(c).get("exercise"), course_meta(c).get("role")) == (exercise, role)
    )


def code(plan, number):
    return [c for c in plan.notebook.cells if c.cell_type == "code"][number]


def test_the_lesson_holds_the_release_and_the_reference_outputs(lesson):
    assert sorted(lesson.reference) == ["01.1", "01.2", "01.3", "01.4"]
    assert lesson.reference["01.1"][0]["text"].startswith("[01.1] passed")
    released = cell(lesson.release, "01.1").source
    assert "NotImplementedError" in released and "flatten(1)" not in released
    with pytest.raises(ValueError, match=r"lesson 42: no solution notebook 42_\*\.ipynb in"):
        Lesson.load("42", SOLUTIONS)


def test_learner_cells_are_carried_by_id_whatever_their_order(lesson):
    nb = solution()
    cell(nb, "01.3").source = "def to_numpy(t):\n    return 'mine'"
    nb.cells.reverse()
    plan = build_grading_notebook(lesson, nb)
    assert code(plan, plan.cells["01.3"][0]).source == "def to_numpy(t):\n    return 'mine'"
    assert "flatten(1)" in code(plan, plan.cells["01.1"][0]).source
    # every other cell is the release's, in the release's order
    released = [c.source for c in lesson.release.cells if c.cell_type == "code"]
    ours = [c.source for c in plan.notebook.cells if c.cell_type == "code"]
    exercise_cells = {number for number, _ in plan.cells.values()}
    check_cells = {check for _, check in plan.cells.values()}
    for number, (theirs, mine) in enumerate(zip(released, ours, strict=True)):
        if number in check_cells:
            assert mine == f"{FRESH_CHECK}\n{theirs}"
        elif number not in exercise_cells:
            assert mine == theirs
    assert plan.notes == [] and plan.points == {"01.1": 1, "01.2": 1, "01.3": 1, "01.4": 1}


def test_a_missing_exercise_is_graded_as_the_stub_and_noted(lesson):
    nb = solution()
    nb.cells.remove(cell(nb, "01.4"))
    plan = build_grading_notebook(lesson, nb)
    assert code(plan, plan.cells["01.4"][0]).source == cell(lesson.release, "01.4").source
    assert plan.notes == ["exercise 01.4: no exercise cell found; the released stub was graded"]


def test_of_duplicated_cells_the_last_edited_one_is_graded(lesson):
    nb = nbformat.read(REPO_ROOT / "notebooks" / "01_tensors.ipynb", as_version=4)
    stub = cell(nb, "01.2")
    first, second = (nbformat.from_dict(stub) for _ in range(2))
    first.source, second.source = (
        "def standardize(x):\n    return 1",
        "def standardize(x):\n    return 2",
    )
    at = nb.cells.index(stub)
    nb.cells[at + 1 : at + 1] = [first, second]  # the stub, then two edits, then the stub again
    nb.cells.append(nbformat.from_dict(stub))
    plan = build_grading_notebook(lesson, nb)
    assert code(plan, plan.cells["01.2"][0]).source == "def standardize(x):\n    return 2"
    assert plan.notes == ["exercise 01.2: 4 cells carry this id; the last edited one was graded"]
    untouched = build_grading_notebook(
        lesson, nbformat.read(REPO_ROOT / "notebooks" / "01_tensors.ipynb", 4)
    )
    assert code(untouched, untouched.cells["01.2"][0]).source == stub.source


def test_check_cells_come_from_the_release_with_a_fresh_check(lesson):
    nb = solution()
    cell(nb, "01.3", "check").source = 'print("[01.3] passed: trust me")'
    plan = build_grading_notebook(lesson, nb)
    check = code(plan, plan.cells["01.3"][1])
    assert check.source.splitlines() == [FRESH_CHECK, 'check("01.3", to_numpy)']
    assert check.source.startswith("from course_utils.grading import check  #")


def test_the_grading_notebook_carries_no_outputs(lesson):
    """Not even when the release itself carried some (here: the solution, every output kept)."""
    with_outputs = Lesson(lesson.lesson, solution(), lesson.reference)
    assert any(c.get("outputs") for c in with_outputs.release.cells)
    plan = build_grading_notebook(with_outputs, solution())
    for c in plan.notebook.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None
    assert lesson.reference["01.1"], "the reference stays with the grader"
    # each exercise cell is followed by its check cell, counted among code cells only
    code_cells = [c for c in plan.notebook.cells if c.cell_type == "code"]
    assert list(plan.cells) == ["01.1", "01.2", "01.3", "01.4"]
    for exercise, (at, check_at) in plan.cells.items():
        assert check_at == at + 1 and f'check("{exercise}"' in code_cells[check_at].source
    check2, ex4 = plan.cells["01.2"][1], plan.cells["01.4"][0]
    assert (plan.where(check2), plan.where(ex4), plan.where(0)) == (
        " (check of 01.2)",
        " (exercise 01.4)",
        "",
    )


def test_a_lesson_without_the_reference_check_is_refused(lesson):
    partial = Lesson(lesson.lesson, lesson.release, {"01.1": lesson.reference["01.1"]})
    with pytest.raises(ValueError, match="solutions/ has no check cell for 01.2; rebuild"):
        build_grading_notebook(partial, solution())


def test_an_unreadable_cell_list_is_graded_as_the_release(lesson):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("hello")])
    plan = build_grading_notebook(lesson, nb)
    assert len(plan.notes) == 4 and plan.flags == []


@pytest.mark.parametrize(
    "source, flag",
    [
        ("open('/x/solutions/01.ipynb')", "mentions solutions/"),
        ("p.write_text('x')", "opens or removes files"),
        ("import sys\nsys.exit(1)", "exits or kills the process"),
        ("import subprocess", "starts processes"),
        ("check = lambda *a: None", "touches the grading machinery"),
        ("import builtins", "replaces builtins or output"),
        ("exec(base64.b64decode(s))", "runs code built at run time"),
        ("f.__globals__['check']", "reaches into frames or globals"),
        ("sys._getframe(1).f_globals", "reaches into frames or globals"),
        ("import gc\ngc.get_objects()", "reaches into frames or globals"),
        ("get_ipython().events.register('post_run_cell', f)", "hooks IPython"),
        ("ip.input_transformers_cleanup.append(f)", "hooks IPython"),
        ("!cat /etc/passwd", "starts processes"),
        ("%%bash\nls", "starts processes"),
        ("object.__setattr__(r, 'verdict', 'passed')", "reaches into frames or globals"),
    ],
)
def test_review_flags_name_the_exercise_and_what_to_read(source, flag):
    flags = plans.review_flags({"01.2": source, "01.1": "def f(x):\n    return x"})
    assert f"01.2: {flag}" in flags
    assert all(f.startswith("01.2") for f in flags)


def test_a_flag_an_exercise_calls_for_is_not_raised_and_its_reference_answer_is(monkeypatch):
    from course_utils.grading.catalog import Entry, catalog

    declared = Entry("01.4", "a gradient", 1, ("starts processes",), (r"grad_reference\(",))
    monkeypatch.setitem(catalog(), "01.4", declared)
    honest = "import subprocess\nsubprocess.run(['true'])"
    assert plans.review_flags({"01.4": honest}) == []
    lazy = plans.review_flags({"01.4": "return grad_reference(x)"})
    assert lazy == ["01.4: calls the course's own answer (grad_reference\\()"]


def test_review_flags_are_sorted_by_exercise_and_do_not_touch_points(lesson):
    nb = solution()
    cell(nb, "01.4").source += "\nimport os\nos._exit(0)"
    cell(nb, "01.1").source += "\nimport subprocess"
    plan = build_grading_notebook(lesson, nb)
    assert plan.flags == ["01.1: starts processes", "01.4: exits or kills the process"]
    assert plan.points == {"01.1": 1, "01.2": 1, "01.3": 1, "01.4": 1}


@pytest.mark.parametrize(
    "source, flag",
    [
        ("m = __name__\nf = getattr(obj, 'ch' + 'eck')", "reaches names built at run time"),
        ("name = 'x'\ngetattr(mod, name)", "reaches names built at run time"),
        ("vars(mod)['ch' + 'eck'] = f", "reaches names built at run time"),
        ("globals()['check'] = f", "reaches names built at run time"),
        ("mod.__dict__['check'] = f", "reaches names built at run time"),
        ("import pkgutil\npkgutil.resolve_name(s)", "reaches names built at run time"),
        ("from importlib import import_module as im\nim(s)", "reaches names built at run time"),
        ("import sys\nsys.audit('x')", "reaches names built at run time"),
        ("import ctypes", "reaches into frames or globals"),
        ("try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame.f_back",
         "reaches into frames or globals"),
        ("import torch\ntorch.Tensor.data_ptr = lambda self: 0", "replaces a library's names"),
        ("import numpy as np\nsetattr(np, 'allclose', f)", "replaces a library's names"),
        ("import threading\nthreading.Thread(target=f)", "opens sockets or threads of its own"),
        ("import socket\nsocket.socket(socket.AF_UNIX)", "opens sockets or threads of its own"),
        ("from course_utils import grading as g", "touches the grading machinery"),
        ("import course_utils.grading.judge.kernel", "touches the grading machinery"),
        ("x = 'course_utils.gra' 'ding'", "touches the grading machinery"),
    ],
)  # fmt: skip
def test_the_code_flags_see_names_that_text_does_not(source, flag):
    assert f"01.2: {flag}" in plans.review_flags({"01.2": source})


def test_the_course_s_own_answer_is_flagged_under_any_name(monkeypatch):
    from course_utils.grading.catalog import Entry, catalog

    monkeypatch.setitem(
        catalog(), "01.4", Entry("01.4", "a gradient", 1, (), (r"round_to_tf32\(",))
    )
    aliased = (
        "from course_utils import precision as p\ndef g(x):\n    f = p.round_to_tf32\n"
        "    return f(x)"
    )
    renamed = (
        "from course_utils.precision import round_to_tf32 as tidy\ndef g(x):\n    return tidy(x)"
    )
    for source in (aliased, renamed):
        assert plans.review_flags({"01.4": source}) == [
            "01.4: calls the course's own answer (round_to_tf32\\()"
        ]
    own = "def round_it(x):\n    return x"
    assert plans.review_flags({"01.4": own}) == []
