"""Exercise 07.1's probe run for real on the one wrong answer whose failure is C++'s own: a
package exported with a static batch size, which the course's C++ loader refuses at another
batch size. The judge's other wrong-answer cases are judged on injected records in
tests/grading/checks/test_lesson07.py; the reference answers run in the solutions lane, and
lesson 07 is graded in the sandbox in tests/integration/test_grader_cpp.py."""

from pathlib import Path

import pytest

from course_utils import cpp, export
from course_utils.grading import run_check

pytestmark = pytest.mark.cpp


def deploy_static(model, batch, folder):
    exported = export.export_model(model, batch, dynamic_batch=False)
    package = export.aoti_package(exported, Path(folder) / "model.pt2")
    program = cpp.build_programs(["aoti_run"]).program("aoti_run")
    return cpp.run_model(program, package.path, batch, folder)


def test_a_static_export_runs_at_its_own_batch_size_and_fails_at_another():
    static = run_check("07.1", deploy_static)
    assert static.verdict == "failed"
    assert static.message.startswith("batch 3: expected your package to accept any batch size")
