"""course_utils.export and the C++ programs in cpp/: built with CMake, compared with Python.

The C++ build (about 15-40 s cold, under a second when up to date) and the AOTInductor compile
(about 25 s cold) are shared by all tests through session fixtures; both reuse build/ between
runs. Where cmake or a C++ compiler is missing, the C++ tests are skipped with the reason.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

from course_utils import export as ex
from course_utils.models import Net

MISSING = ex.toolchain_missing()
needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU, found none"
)


def _net(seed: int = 0) -> Net:
    torch.manual_seed(seed)
    return Net().eval()


# ---------------------------------------------------------------------------- fast unit tests


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


def test_toolchain_missing_names_the_tool(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert "cmake not found" in ex.toolchain_missing()
    with pytest.raises(ex.CppProgramError, match="cannot build the C\\+\\+ programs: cmake"):
        ex.build_programs()


def test_unknown_program_and_missing_binary(tmp_path):
    if MISSING is None:
        with pytest.raises(ValueError, match=r"unknown C\+\+ program\(s\) \['nope'\]"):
            ex.build_programs(["nope"], folder=tmp_path)
    with pytest.raises(ValueError, match="build it first with build_programs"):
        ex.run_program(tmp_path / "aoti_run")


def test_torchscript_warnings_become_one_line_each(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning escaping the helper fails the test
        ex.torchscript_script(_net(), tmp_path / "s.pt")
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith("note: ") for line in lines)
    assert any("deprecated" in line for line in lines)
    assert len(lines) == len(set(lines))


# ---------------------------------------------------------------------------- C++ programs


@pytest.fixture(scope="session")
def programs():
    """All C++ programs, built (incrementally) in the project's build/cpp."""
    if MISSING:
        pytest.skip(f"C++ toolchain: {MISSING}")
    return ex.build_programs()


@pytest.fixture(scope="session")
def model_and_package(tmp_path_factory):
    """A seeded Net exported with a dynamic batch, compiled by AOTInductor (reused if cached)."""
    model = _net(seed=1)
    exported = ex.export_model(model, torch.randn(4, 3, 32, 32))
    package = ex.aoti_package(exported, tmp_path_factory.mktemp("aoti") / "net.pt2")
    return model, package.path


@pytest.fixture(scope="session")
def torchscript_files(tmp_path_factory):
    model, folder = _net(seed=2), tmp_path_factory.mktemp("ts")
    example = torch.randn(4, 3, 32, 32)
    return (
        model,
        ex.torchscript_trace(model, example, folder / "t.pt"),
        ex.torchscript_script(model, folder / "s.pt"),
    )


@pytest.mark.slow
def test_rebuild_is_a_no_op(programs):
    again = ex.build_programs()
    assert again.up_to_date and not again.configured
    assert again.seconds < 10
    assert all(programs.program(p).is_file() for p in ex.PROGRAMS)


@pytest.mark.slow
def test_cuda_check_reproduces_pythons_random_tensor(programs):
    got = ex.cuda_check(programs.program("cuda_check"), seed=3)
    assert got["cuda"] == torch.cuda.is_available()
    device = "cuda" if got["cuda"] else "cpu"
    assert got["device"] == device
    torch.manual_seed(3)
    want = torch.rand(2, 3, device=device).cpu()
    torch.testing.assert_close(got["tensor"], want, atol=1e-8, rtol=0)


@pytest.mark.slow
def test_aoti_package_in_python_and_cpp_at_two_batch_sizes(programs, model_and_package, tmp_path):
    model, package = model_and_package
    in_python = ex.load_package(package)
    for batch in (1, 5):
        x = torch.randn(batch, 3, 32, 32)
        with torch.no_grad():
            want = model(x)
        torch.testing.assert_close(in_python(x), want, atol=1e-5, rtol=0)
        got = ex.run_model(programs.program("aoti_run"), package, x, tmp_path)
        assert got.output.shape == (batch, 10)
        torch.testing.assert_close(got.output, want, atol=1e-5, rtol=0)
        assert got.median_ms is None


@pytest.mark.slow
def test_aoti_cpp_times_itself(programs, model_and_package, tmp_path):
    _, package = model_and_package
    got = ex.run_model(
        programs.program("aoti_run"),
        package,
        torch.randn(2, 3, 32, 32),
        tmp_path,
        repeat=5,
        warmup=1,
    )
    assert got.median_ms is not None and got.median_ms > 0


@pytest.mark.slow
def test_identical_package_is_reused(model_and_package, tmp_path):
    model, _ = model_and_package
    exported = ex.export_model(model, torch.randn(4, 3, 32, 32))
    again = ex.aoti_package(exported, tmp_path / "again.pt2")
    assert again.reused and again.seconds == 0.0 and again.path.is_file()


@pytest.mark.slow
@pytest.mark.parametrize("which", ["trace", "script"])
def test_torchscript_cpp_matches_python(programs, torchscript_files, tmp_path, which):
    model, traced, scripted = torchscript_files
    path = traced if which == "trace" else scripted
    x = torch.randn(3, 3, 32, 32)
    got = ex.run_model(programs.program("ts_run"), path, x, tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(got.output, model(x), atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("program", ["aoti_run", "ts_run"])
def test_missing_model_file_is_a_clear_error(programs, tmp_path, program):
    with pytest.raises(ex.CppProgramError, match=f"{program} error: cannot open model file .*nope"):
        ex.run_model(
            programs.program(program), tmp_path / "nope", torch.zeros(1, 3, 32, 32), tmp_path
        )


@pytest.mark.slow
def test_missing_input_file_is_a_clear_error(programs, model_and_package, tmp_path):
    _, package = model_and_package
    with pytest.raises(ex.CppProgramError, match="cannot open input file .*missing.tensor"):
        ex.run_program(
            programs.program("aoti_run"),
            package,
            tmp_path / "missing.tensor",
            tmp_path / "out.tensor",
        )


@pytest.mark.slow
def test_not_a_tensor_file_is_a_clear_error(programs, model_and_package, tmp_path):
    _, package = model_and_package
    (tmp_path / "bad.tensor").write_text("1 2 3\n")
    with pytest.raises(ex.CppProgramError, match="is not a course tensor file"):
        ex.run_program(
            programs.program("aoti_run"), package, tmp_path / "bad.tensor", tmp_path / "out.tensor"
        )


@pytest.mark.slow
def test_wrong_input_shape_is_a_clear_error(
    programs, model_and_package, torchscript_files, tmp_path
):
    _, package = model_and_package
    _, _, scripted = torchscript_files
    wrong = torch.zeros(2, 1, 28, 28)
    rule = r"input shape \[2, 1, 28, 28\] does not match the model's input shape \[-1, 3, 32, 32\]"
    with pytest.raises(ex.CppProgramError, match=rule):
        ex.run_model(programs.program("aoti_run"), package, wrong, tmp_path)
    with pytest.raises(ex.CppProgramError, match=rule):
        ex.run_model(programs.program("ts_run"), scripted, wrong, tmp_path)


# ---------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.slow
@needs_cuda
def test_gpu_package_runs_in_cpp_on_cuda(programs, tmp_path):
    """Export and package on the GPU, run in C++ on the GPU; LibTorch must see CUDA."""
    assert ex.cuda_check(programs.program("cuda_check"))["cuda"]
    model = _net(seed=4).cuda()
    exported = ex.export_model(model, torch.randn(4, 3, 32, 32, device="cuda"))
    package = ex.aoti_package(exported, tmp_path / "net_cuda.pt2")
    x = torch.randn(6, 3, 32, 32, device="cuda")
    got = ex.run_model(programs.program("aoti_run"), package.path, x, tmp_path, repeat=5)
    assert "device: cuda" in got.stdout
    with torch.no_grad():
        torch.testing.assert_close(got.output, model(x).cpu(), atol=1e-4, rtol=1e-4)
    scripted = ex.torchscript_script(model, tmp_path / "s.pt")
    got = ex.run_model(programs.program("ts_run"), scripted, x, tmp_path, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(got.output, model(x).cpu(), atol=1e-4, rtol=1e-4)
