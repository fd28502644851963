"""grader/results: content keys, what a second run grades again, and the result files."""

from pathlib import Path

from course_utils.grading.grader.gradebook import ExerciseGrade, SubmissionGrade
from course_utils.grading.grader.results import (
    Store,
    choose_seed,
    file_digest,
    grade_from_json,
    grade_to_json,
    grading_context,
    result_key,
    to_do,
)
from course_utils.grading.grader.submissions import Submission


def files(tmp_path: Path, **texts: str) -> dict[str, Path]:
    paths = {}
    for name, text in texts.items():
        paths[name] = tmp_path / f"{name}.ipynb"
        paths[name].write_text(text)
    return paths


def test_the_key_follows_the_content_not_the_file(tmp_path):
    p = files(tmp_path, a="notebook one", b="notebook one", c="notebook two")
    ann = Submission("ann", "01", p["a"])
    same = result_key(ann, file_digest(p["a"]), "ctx")
    assert result_key(Submission("ann", "01", p["b"]), file_digest(p["b"]), "ctx") == same
    assert result_key(ann, file_digest(p["c"]), "ctx") != same  # changed: graded again
    assert result_key(Submission("bo", "01", p["a"]), file_digest(p["a"]), "ctx") != same
    assert result_key(ann, file_digest(p["a"]), "other settings") != same
    p["a"].write_text("notebook one, edited")
    assert result_key(ann, file_digest(p["a"]), "ctx") != same


def test_the_grading_context_changes_with_the_seed_the_limits_and_the_lesson_s_files(tmp_path):
    p = files(tmp_path, sol="solution", checks="checkers")
    lessons = {"01": [p["sol"], p["checks"]]}
    base = grading_context(7, {"timeout": 60}, lessons)["01"]
    assert grading_context(7, {"timeout": 60}, lessons)["01"] == base
    assert grading_context(8, {"timeout": 60}, lessons)["01"] != base
    assert grading_context(7, {"timeout": 90}, lessons)["01"] != base
    p["checks"].write_text("checkers, fixed")
    assert grading_context(7, {"timeout": 60}, lessons)["01"] != base


def test_to_do_keeps_the_submissions_without_a_result_in_order(tmp_path):
    subs = [Submission(n, "01", tmp_path / n) for n in ("ann", "bo", "cy", "di")]
    keys = {s: f"k-{s.learner}" for s in subs}
    missing, kept = to_do(keys, {"k-bo", "k-di", "k-someone-else"})
    assert ([s.learner for s in missing], kept) == (["ann", "cy"], 2)
    assert to_do(keys, set()) == (subs, 0)


def test_choose_seed_given_then_stored_then_new():
    assert choose_seed(5, 9) == 5
    assert choose_seed(None, 9) == 9
    drawn = {choose_seed(None, None) for _ in range(5)}
    assert len(drawn) > 1 and all(0 <= s < 2**31 for s in drawn)


def grade(status="ok") -> SubmissionGrade:
    return SubmissionGrade(
        "ann",
        "05",
        "subs/ann/05.ipynb",
        status,
        "why" if status != "ok" else "",
        exercises=[
            ExerciseGrade("05.2", "plan", 1, "passed", "fine", 4, 4),
            ExerciseGrade("05.3", "header", 1, "failed", "no --time"),
        ],
        flags=["05.2: opens or removes files"],
        notes=["a note"],
        seconds=12.5,
        sandbox="bubblewrap",
        seed=42,
    )


def test_a_result_file_gives_back_the_grade_it_was_written_from():
    key, back = grade_from_json(grade_to_json(grade(), "k1"))
    assert (key, back) == ("k1", grade())


def test_the_store_keeps_results_by_key_and_grades_errors_again(tmp_path):
    store = Store(tmp_path)
    store.save("k1", grade())
    store.save("k2", grade("error"))
    store.save("k3", grade("timeout"))
    (store.folder / "k4.json").write_text("{ half a file")
    assert store.load("k1") == grade() and store.load("k9") is None and store.load("k4") is None
    assert store.graded(["k1", "k2", "k3", "k4", "k9"]) == {"k1", "k3"}
    assert store.load("k2").status == "error"  # merged into the gradebook, and graded again
    assert store.seconds_by_lesson() == {"05": [12.5, 12.5, 12.5]}
    assert store.seed() is None
    store.keep_seed(1234)
    assert Store(tmp_path).seed() == 1234
    assert not [p for p in store.folder.iterdir() if p.name.endswith(".tmp")]
