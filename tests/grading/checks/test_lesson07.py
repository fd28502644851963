"""Lesson 07 checkers: each passes on the reference answer, fails on a wrong one, and reports
'not attempted yet' on a stub. 07.1 and 07.2 build and run C++: here they are judged on what
their probes record of a run (injected); tests/integration/test_checks_lesson07_cpp.py runs
the probes for real. Nothing here starts a process."""

import re

import pytest

from course_utils import cpp
from course_utils.doctor import gpu
from course_utils.grading import FAILED, NOT_ATTEMPTED, PASSED, run_check
from course_utils.grading.checks import lesson07


def diagnose(capability, archs, built_with, driver):
    """The reference answer, with the doctor's architecture rule (`course doctor` uses it):
    cubins first, under a driver of the build's CUDA major version or newer, then PTX, whose ISA
    version the driver must know (the CUDA that made it)."""
    if gpu.arch_supported(capability, [a for a in archs if a.startswith("sm_")]):
        return "runs" if driver[0] >= built_with[0] else "update the driver"
    if gpu.arch_supported(capability, [a for a in archs if a.startswith("compute_")]):
        return "runs" if tuple(driver) >= tuple(built_with) else "update the driver"
    return "rebuild for the GPU"


def ignores_the_driver(capability, archs, built_with, driver):
    return diagnose(capability, archs, built_with, built_with)


def ignores_the_major_version(capability, archs, built_with, driver):
    """The rule as 07.3 had it: a cubin that fits runs, whatever CUDA built it."""
    if gpu.arch_supported(capability, [a for a in archs if a.startswith("sm_")]):
        return "runs"
    return diagnose(capability, archs, built_with, driver)


def stub(*args):
    raise NotImplementedError("Exercise 07.k")


def test_diagnose_passes_on_the_reference():
    assert run_check("07.3", diagnose).verdict == PASSED


def test_diagnose_that_forgets_the_ptx_isa_fails_with_the_case():
    result = run_check("07.3", ignores_the_driver)
    assert result.verdict == FAILED
    assert re.search(
        r"diagnose\(\(9, 0\), \['sm_80', 'compute_80'\], built with CUDA 12.8, driver for CUDA "
        r"12.2\): expected 'update the driver', got 'runs'",
        result.message,
    ), result.message


def test_diagnose_that_runs_a_cuda_13_cubin_under_a_cuda_12_driver_fails():
    result = run_check("07.3", ignores_the_major_version)
    assert result.verdict == FAILED
    assert result.message == (
        "diagnose((9, 0), ['sm_90'], built with CUDA 13.0, driver for CUDA 12.8): expected "
        "'update the driver', got 'runs'"
    )


def test_deploy_must_return_what_the_cpp_program_computed():
    python_only = run_check("07.1", lambda model, x, folder: model(x))
    assert python_only.verdict == FAILED
    assert python_only.message == ("expected the C++ program's result (cpp.run_model), got Tensor")


@pytest.fixture(autouse=True)
def in_a_lesson_folder(tmp_path, monkeypatch):
    """07.2's probe builds in the lesson's project, runs/07/example where the notebook runs."""
    monkeypatch.chdir(tmp_path)


@pytest.mark.skipif(bool(cpp.toolchain_missing()), reason="needs cmake and a C++ compiler")
def test_07_2_builds_in_the_lesson_s_project_and_keeps_what_the_learner_added(tmp_path):
    """The check hands `build_predict` the project the lesson made (so the lesson's own build
    after the check finds `predict` built), made as the lesson makes it where it is missing."""
    handed = []

    def build_predict(project):
        handed.append(project)
        lists = project / "CMakeLists.txt"
        lists.write_text(lists.read_text() + "# predict added here\n")
        return project / "predict"  # not built: the check fails, after the build was asked for

    for _ in range(2):
        assert run_check("07.2", build_predict).verdict == FAILED
    project = tmp_path / "runs" / "07" / "example"
    assert handed == [project, project]
    assert (project / "CMakeLists.txt").read_text().count("# predict added here") == 2
    assert "include(CourseTorch)" in (project / "CMakeLists.txt").read_text()
    documentation = cpp.cpp_source_dir() / "examples" / "documentation"
    assert (project / "example.cpp").read_text() == (documentation / "example.cpp").read_text()


def test_own_program_must_be_a_built_file(tmp_path):
    missing = run_check("07.2", lambda project: tmp_path / "predict")
    assert missing.verdict == FAILED
    assert missing.message.startswith("expected the path of your built program, got no file at")


# ---- 07.1 and 07.2 judged on their runs' records ---------------------------------------------
# What the probes (run_deploy, run_build_predict) record of a learner's run, injected, in the
# shape a real run records it (the error lines are examples). The reference's C++ runs are the
# solutions lane's; a static export's real run is tests/integration/test_checks_lesson07_cpp.py.


def deploy_record(seed=0, **changes):
    """run_deploy's record of a right answer on the judge's draws, with `changes`."""
    first, second = lesson07.DEPLOY_BATCHES
    want = lesson07._eager(seed, lesson07._batch(first, seed + 1))
    again = lesson07._eager(seed, lesson07._batch(second, seed + 2))
    record = {"kind": "CppResult", "returned": want, "written": want, "again": again}
    return record | {"files": ["model.pt2", "output.tensor"], "packages": 1} | changes


def judged(monkeypatch, exercise_id, record):
    monkeypatch.setattr(lesson07, "run_probe", lambda probe, *answers, **params: record)
    return run_check(exercise_id, lambda *args: None)


def test_deploy_is_judged_on_what_the_cpp_program_wrote(monkeypatch):
    assert judged(monkeypatch, "07.1", deploy_record()).verdict == PASSED


def test_a_package_of_another_model_fails(monkeypatch):
    other = lesson07._eager(1, lesson07._batch(5, 1))  # the learner's own weights, not the judge's
    result = judged(monkeypatch, "07.1", deploy_record(returned=other, written=other))
    assert result.message.startswith("the C++ output of batch 5: expected outputs within 1e-05")


def test_a_static_export_fails_at_the_second_batch_size(monkeypatch):
    error = "Error in AOTInductor: the input's size 3 of dimension 0 is not 5"
    result = judged(monkeypatch, "07.1", deploy_record(again=None, again_error=error))
    assert result.message == (
        f"batch 3: expected your package to accept any batch size, got {error} (export with a "
        "dynamic batch dimension)"
    )


def test_pythons_output_dressed_as_the_programs_fails(monkeypatch):
    """A package left in the folder and a CppResult of Python's output: no file of a C++ run."""
    record = deploy_record(written=None, files=["model.pt2"])
    result = judged(monkeypatch, "07.1", record)
    assert result.message.startswith(
        "expected the output file the C++ program wrote in the folder (output.tensor"
    ), result.message


def program_record(**changes):
    """run_build_predict's record of the learner's own program, with `changes`."""
    output = lesson07._eager(0, lesson07._batch(lesson07.PREDICT_BATCH, 3))
    record = {"kind": "PosixPath", "program": "/build/predict", "course_program": False}
    return record | {"output": output} | changes


def test_own_program_is_judged_on_its_output(monkeypatch):
    assert judged(monkeypatch, "07.2", program_record()).verdict == PASSED


def test_the_courses_program_or_one_that_echoes_its_input_fails(monkeypatch):
    course = program_record(program="/build/cpp/aoti_run", course_program=True)
    assert judged(monkeypatch, "07.2", course).message == (
        "expected your own program, built from your project, got the course's aoti_run"
    )
    echo = program_record(program="/tmp/echo", output=lesson07._batch(4, 3))
    assert judged(monkeypatch, "07.2", echo).message == (
        "echo on batch 4: expected an output of shape (4, 10), got (4, 3, 32, 32)"
    )


def test_a_program_that_fails_says_how_it_was_run(monkeypatch):
    record = program_record(output=None, error="predict: exited with 134 (Aborted)")
    assert judged(monkeypatch, "07.2", record).message == (
        "expected predict PACKAGE INPUT OUTPUT to write OUTPUT, got predict: exited with 134 "
        "(Aborted)"
    )


@pytest.mark.parametrize("exercise_id", ["07.1", "07.2", "07.3"])
def test_stubs_are_not_attempted(exercise_id):
    assert run_check(exercise_id, stub).verdict == NOT_ATTEMPTED


def test_a_missing_compiler_is_named(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda tool: None)
    built = run_check("07.2", lambda project: project)
    assert built.message.startswith("this check builds and runs C++, but cmake not found on PATH")


# ---- held-out cases ------------------------------------------------------------------------


def test_07_3_held_out_cases_fail_a_table_of_the_visible_cases(held_out_catches):
    from course_utils.grading.checks.lesson07 import DIAGNOSES

    table = {(c, tuple(a), b, d): want for c, a, b, d, want in DIAGNOSES}

    def from_the_table(capability, archs, built_with, driver):  # right on the visible cases only
        return table.get(
            (tuple(capability), tuple(archs), tuple(built_with), tuple(driver)), "runs"
        )

    failure = held_out_catches("07.3", diagnose, from_the_table)
    assert re.fullmatch(
        r"diagnose\(\(\d+, \d\), \[.*\], built with CUDA 1[23]\.\d, driver for CUDA 1[23]\.\d\): "
        r"expected '(update the driver|rebuild for the GPU)', got 'runs'",
        failure,
    ), failure


def test_lazy_answers_are_flagged_and_builds_are_allowed():
    from course_utils.grading.grader.plan import review_flags

    honest = {
        "07.1": "def deploy(model, batch, folder):\n    subprocess.run(['cmake', '--build', 'b'])",
        "07.2": "def build_predict(project):\n    (project / 'predict.cpp').write_text(SOURCE)",
    }
    assert review_flags(honest) == []
    lazy = {
        "07.1": "def deploy(model, batch, folder):\n    return cpp_demo.demo(folder)",
        "07.2": "def build_predict(project):\n    return build / 'aoti_run'",
        "07.3": "def diagnose(c, archs, b, d):\n    return gpu.arch_supported(c, archs)",
    }
    flags = review_flags(lazy)
    assert [f.split(":")[0] for f in flags] == ["07.1", "07.2", "07.3"], flags


# ---- what the grader builds once before lesson 07's sandboxed runs ---------------------------


def test_the_grader_builds_the_course_programs_once_for_the_runs(tmp_path, monkeypatch):
    from course_utils import cpp
    from course_utils.grading.grader.prepared import prepare_runs
    from course_utils.grading.runner.limits import Limits

    built = []

    def build_programs(targets=cpp.PROGRAMS, folder=None, use_cuda_toolkit=False):
        built.append(folder)
        return cpp.Build(folder, 12.5, True, False)

    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    monkeypatch.setattr(cpp, "toolchain_missing", lambda: None)
    monkeypatch.setattr(cpp, "build_programs", build_programs)
    lessons = {"06": object(), "07": object()}
    said = prepare_runs(lessons, Limits(sandbox=True))
    assert built == [tmp_path / "cpp"]  # the grader's own folder, never a prebuilt one
    assert said == [
        f"lesson 07: C++ programs built in {tmp_path / 'cpp'} (12.5 s), shown read-only to each run"
    ]
    assert prepare_runs(lessons, Limits(sandbox=False)) == [] and len(built) == 1


def test_without_a_toolchain_or_with_a_failed_build_each_run_builds_its_own(monkeypatch):
    from course_utils import cpp

    monkeypatch.setattr(cpp, "toolchain_missing", lambda: "cmake not found on PATH")
    assert lesson07.prepare_runs() == (
        "lesson 07: the course's C++ programs are not built beforehand (cmake not found on PATH)"
    )

    def fails(**kwargs):
        raise cpp.CppProgramError("cmake --build failed (exit code 1):\nerror: ...")

    monkeypatch.setattr(cpp, "toolchain_missing", lambda: None)
    monkeypatch.setattr(cpp, "build_programs", fails)
    assert "beforehand failed (cmake --build failed (exit code 1):)" in lesson07.prepare_runs()


def test_a_lesson_whose_checks_do_not_import_prepares_nothing(monkeypatch):
    from course_utils.grading import exercises
    from course_utils.grading.grader.prepared import prepare_runs
    from course_utils.grading.runner.limits import Limits

    monkeypatch.setattr(exercises, "LOAD_ERRORS", {})  # this process's registry stays as it was
    assert prepare_runs({"99": object()}, Limits(sandbox=True)) == []
