"""course_utils.export in this process: tensor files, torch.export, places, errors.

The C++ programs themselves are built and run in tests/integration/test_export_cpp.py."""

from __future__ import annotations

import os
import warnings

import pytest
import torch

from course_utils import export as ex
from course_utils.models import Net


def _net(seed: int = 0) -> Net:
    torch.manual_seed(seed)
    return Net().eval()


def test_tensor_file_round_trip(tmp_path):
    t = torch.randn(2, 3, 4)
    path = ex.write_tensor(tmp_path / "t.tensor", t)
    assert path.read_bytes().startswith(b"course-tensor float32 3 2 3 4\n")
    assert torch.equal(ex.read_tensor(path), t)


def test_read_tensor_rejects_other_files(tmp_path):
    (tmp_path / "x").write_bytes(b"hello\n1234")
    with pytest.raises(ValueError, match="is not a tensor file"):
        ex.read_tensor(tmp_path / "x")
    (tmp_path / "y").write_bytes(b"course-tensor float32 1 4\n" + b"\0" * 8)
    with pytest.raises(ValueError, match=r"needs 4 values, found 2"):
        ex.read_tensor(tmp_path / "y")


def test_export_dynamic_batch_runs_at_two_sizes():
    model = _net()
    exported = ex.export_model(model, torch.randn(2, 3, 32, 32))
    assert ex.input_shape_spec(exported) == "-1,3,32,32"
    for batch in (1, 7):
        x = torch.randn(batch, 3, 32, 32)
        torch.testing.assert_close(exported.module()(x), model(x))


def test_export_static_shape_spec():
    exported = ex.export_model(_net(), torch.randn(2, 3, 32, 32), dynamic_batch=False)
    assert ex.input_shape_spec(exported) == "2,3,32,32"


def test_export_rejects_batch_of_one_for_dynamic_batch():
    with pytest.raises(ValueError, match="batch of 2 or more"):
        ex.export_model(_net(), torch.randn(1, 3, 32, 32))


def test_inductor_cache_sets_and_restores(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/else")
    with ex.inductor_cache(tmp_path / "cache") as folder:
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder.resolve())
        assert folder.is_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/somewhere/else"


def test_build_root_and_cpp_dir_follow_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    assert ex.build_root() == tmp_path
    assert (ex.cpp_source_dir() / "aoti_run.cpp").is_file()
    monkeypatch.setenv("COURSE_CPP_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="no CMakeLists.txt in .*COURSE_CPP_DIR"):
        ex.cpp_source_dir()


@pytest.mark.parametrize(
    ("version", "flags"),
    [
        ("3.25.1", []),  # CMake 3 warns about cmake_minimum_required(VERSION 3.0) and goes on
        ("4.0.0", ["-DCMAKE_POLICY_VERSION_MINIMUM=3.5"]),  # CMake 4 refuses it without this
        ("4.1.2", ["-DCMAKE_POLICY_VERSION_MINIMUM=3.5"]),
    ],
)
def test_policy_floor_only_for_cmake_4(version, flags):
    assert ex.policy_floor(version) == flags


def test_configure_command_passes_the_floor_to_cmake_4(tmp_path, monkeypatch):
    monkeypatch.setattr(ex, "cmake_version", lambda: "4.0.3")
    command = ex.configure_command(tmp_path, tmp_path / "build")
    assert command[:2] == ["cmake", "-S"] and "-DCMAKE_POLICY_VERSION_MINIMUM=3.5" in command
    monkeypatch.setattr(ex, "cmake_version", lambda: "3.31.6")
    assert not any("POLICY" in arg for arg in ex.configure_command(tmp_path, tmp_path / "build"))


def test_toolchain_missing_names_the_tool(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert "cmake not found" in ex.toolchain_missing()
    with pytest.raises(ex.CppProgramError, match="cannot build C\\+\\+ here: cmake"):
        ex.build_programs()


@pytest.mark.cpp
def test_unknown_program_and_missing_binary(tmp_path):
    with pytest.raises(ValueError, match=r"unknown C\+\+ program\(s\) \['nope'\]"):
        ex.build_programs(["nope"], folder=tmp_path)
    with pytest.raises(ValueError, match="build it first with build_programs"):
        ex.run_program(tmp_path / "aoti_run")


def test_torchscript_warnings_are_shown_once_each_in_short_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ex, "_NOTED", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning escaping the helper fails the test
        ex.torchscript_script(_net(), tmp_path / "s.pt")
        first = capsys.readouterr().out.splitlines()
        ex.torchscript_script(_net(), tmp_path / "s2.pt")
        second = capsys.readouterr().out.splitlines()
        ex.torchscript_load(tmp_path / "s.pt")
        third = capsys.readouterr().out.splitlines()
    assert len(first) == 1 and first[0].startswith("note: deprecated, use torch.export: ")
    assert "torch.jit.script" in first[0] and "torch.jit.save" in first[0]
    assert second == []  # nothing new: nothing printed
    assert third == ["note: deprecated, use torch.export: torch.jit.load"]


@pytest.mark.parametrize(
    "warned, note",
    [
        ([], "torch.jit.script, torch.jit.save"),  # PyTorch 2.6: TorchScript does not warn
        (["torch.jit.script", "torch.jit.save"], "torch.jit.script, torch.jit.save"),  # 2.14
        (["torch.jit.script"], "torch.jit.script"),  # what it says wins over what it calls
    ],
)
def test_torchscript_notes_name_the_calls_whether_or_not_pytorch_warns(
    warned, note, capsys, monkeypatch
):
    monkeypatch.setattr(ex, "_NOTED", set())
    with ex._torchscript_notes("torch.jit.script", "torch.jit.save"):
        for api in warned:
            message = f"`{api}` is deprecated. Please switch to `torch.export`."
            warnings.warn(message, FutureWarning, stacklevel=1)
    assert capsys.readouterr().out.splitlines() == [f"note: deprecated, use torch.export: {note}"]
