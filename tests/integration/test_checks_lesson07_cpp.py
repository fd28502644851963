"""Exercises 07.1 and 07.2 checked for real: the learner's package in the course's C++ loader,
and the learner's own C++ program, built with CMake; both compared with Python."""

import stat
from pathlib import Path

import pytest
import torch

from course_utils import cpp, export, files
from course_utils.grading import run_check
from course_utils.models import Net

pytestmark = pytest.mark.cpp


def deploy(model, batch, folder):
    exported = export.export_model(model, batch)
    package = export.aoti_package(exported, Path(folder) / "model.pt2")
    program = cpp.build_programs(["aoti_run"]).program("aoti_run")
    return cpp.run_model(program, package.path, batch, folder)


def deploy_static(model, batch, folder):
    exported = export.export_model(model, batch, dynamic_batch=False)
    package = export.aoti_package(exported, Path(folder) / "model.pt2")
    program = cpp.build_programs(["aoti_run"]).program("aoti_run")
    return cpp.run_model(program, package.path, batch, folder)


PREDICT = """\
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include "tensor_io.h"

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  torch::inductor::AOTIModelPackageLoader loader(argv[1]);
  auto outputs = loader.run({course::read_tensor(argv[2])});
  course::write_tensor(argv[3], outputs.at(0));
}
"""


def build_predict(project):
    files.write_text_if_changed(project / "predict.cpp", PREDICT)
    cmake = (project / "CMakeLists.txt").read_text()
    if "add_executable(predict" not in cmake:
        target = (
            "add_executable(predict predict.cpp)\n"
            'target_link_libraries(predict "${TORCH_LIBRARIES}")\n'
            f'target_include_directories(predict PRIVATE "{cpp.cpp_source_dir()}")\n'
        )
        files.write_text_if_changed(project / "CMakeLists.txt", cmake + target)
    return cpp.build_project(project, project / "build").program("predict")


def test_deploy_passes_on_the_reference_and_a_static_export_fails():
    done = run_check("07.1", deploy)
    assert done.passed, done.message
    static = run_check("07.1", deploy_static)
    assert static.verdict == "failed"
    assert static.message.startswith("batch 3: expected your package to accept any batch size")


def test_deploy_that_only_pretends_to_run_cpp_fails():
    """A package left in the folder, and Python's output dressed as the C++ program's result:
    no file of the C++ program's run is there."""

    def pretends(model, batch, folder):
        exported = export.export_model(model, batch)
        export.aoti_package(exported, Path(folder) / "model.pt2")
        with torch.no_grad():
            return cpp.CppResult(model(batch), None, "")

    forged = run_check("07.1", pretends)
    assert forged.verdict == "failed"
    assert forged.message.startswith(
        "expected the output file the C++ program wrote in the folder (output.tensor"
    ), forged.message


def test_deploy_of_another_model_fails():
    """The check's model, not one of the learner's own: a package of other weights runs, but
    not with the outputs the judge computes."""

    def own_model(model, batch, folder):
        torch.manual_seed(1)
        return deploy(Net().eval(), batch, folder)

    other = run_check("07.1", own_model)
    assert other.verdict == "failed"
    assert other.message.startswith("the C++ output of batch 5: expected outputs within 1e-05")


def test_own_program_passes_on_the_reference():
    result = run_check("07.2", build_predict)
    assert result.passed, result.message


def test_the_courses_program_or_one_that_echoes_its_input_fails(tmp_path):
    course = cpp.build_programs(["aoti_run"]).program("aoti_run")
    borrowed = run_check("07.2", lambda project: course)
    assert borrowed.message == (
        "expected your own program, built from your project, got the course's aoti_run"
    )
    echo = tmp_path / "echo"
    echo.write_text('#!/bin/sh\ncp "$2" "$3"\n')
    echo.chmod(echo.stat().st_mode | stat.S_IEXEC)
    wrong = run_check("07.2", lambda project: echo)
    assert wrong.verdict == "failed"
    assert wrong.message == (
        "echo on batch 4: expected an output of shape (4, 10), got (4, 3, 32, 32)"
    ), wrong.message
