"""The C++ programs in cpp/: built with CMake against the wheel's LibTorch, compared with Python.

The C++ build (about 15-40 s cold, under a second when up to date) and the AOTInductor compile
(about 25 s cold) are shared by all tests through session fixtures; both reuse build/ between
runs. Where cmake or a C++ compiler is missing, the tests are skipped with the reason (marker
`cpp`, tests/needs.py); in CI they must run.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from course_utils import ccache, cpp
from course_utils import export as ex
from course_utils.models import Net
from course_utils.paths import REPO_ROOT

pytestmark = pytest.mark.cpp


def _net(seed: int = 0) -> Net:
    torch.manual_seed(seed)
    return Net().eval()


# ---------------------------------------------------------------------------- C++ programs


@pytest.fixture(scope="session")
def programs():
    """All C++ programs, built (incrementally) in the project's build/cpp."""
    return cpp.build_programs()


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


def test_rebuild_is_a_no_op(programs):
    again = cpp.build_programs()
    assert again.up_to_date and not again.configured
    assert again.seconds < 10
    assert all(programs.program(p).is_file() for p in cpp.PROGRAMS)


def test_cuda_check_reproduces_pythons_random_tensor(programs):
    got = cpp.cuda_check(programs.program("cuda_check"), seed=3)
    assert got["cuda"] == torch.cuda.is_available()
    device = "cuda" if got["cuda"] else "cpu"
    assert got["device"] == device
    torch.manual_seed(3)
    want = torch.rand(2, 3, device=device).cpu()
    torch.testing.assert_close(got["tensor"], want, atol=1e-8, rtol=0)


def test_aoti_package_in_python_and_cpp_at_two_batch_sizes(programs, model_and_package, tmp_path):
    model, package = model_and_package
    in_python = ex.load_package(package)
    for batch in (1, 5):
        x = torch.randn(batch, 3, 32, 32)
        with torch.no_grad():
            want = model(x)
        torch.testing.assert_close(in_python(x), want, atol=1e-5, rtol=0)
        got = cpp.run_model(programs.program("aoti_run"), package, x, tmp_path)
        assert got.output.shape == (batch, 10)
        torch.testing.assert_close(got.output, want, atol=1e-5, rtol=0)
        assert got.median_ms is None


def test_aoti_cpp_times_itself(programs, model_and_package, tmp_path):
    _, package = model_and_package
    got = cpp.run_model(
        programs.program("aoti_run"),
        package,
        torch.randn(2, 3, 32, 32),
        tmp_path,
        repeat=5,
        warmup=1,
    )
    assert got.median_ms is not None and got.median_ms > 0


def test_identical_package_is_reused(model_and_package, tmp_path):
    model, _ = model_and_package
    exported = ex.export_model(model, torch.randn(4, 3, 32, 32))
    again = ex.aoti_package(exported, tmp_path / "again.pt2")
    assert again.reused and again.seconds == 0.0 and again.path.is_file()


@pytest.mark.parametrize("which", ["trace", "script"])
def test_torchscript_cpp_matches_python(programs, torchscript_files, tmp_path, which):
    model, traced, scripted = torchscript_files
    path = traced if which == "trace" else scripted
    x = torch.randn(3, 3, 32, 32)
    got = cpp.run_model(programs.program("ts_run"), path, x, tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(got.output, model(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("program", ["aoti_run", "ts_run"])
def test_missing_model_file_is_a_clear_error(programs, tmp_path, program):
    missing = f"{program} error: cannot open model file .*nope"
    with pytest.raises(cpp.CppProgramError, match=missing):
        cpp.run_model(
            programs.program(program), tmp_path / "nope", torch.zeros(1, 3, 32, 32), tmp_path
        )


def test_missing_input_file_is_a_clear_error(programs, model_and_package, tmp_path):
    _, package = model_and_package
    with pytest.raises(cpp.CppProgramError, match="cannot open input file .*missing.tensor"):
        cpp.run_program(
            programs.program("aoti_run"),
            package,
            tmp_path / "missing.tensor",
            tmp_path / "out.tensor",
        )


def test_not_a_tensor_file_is_a_clear_error(programs, model_and_package, tmp_path):
    _, package = model_and_package
    (tmp_path / "bad.tensor").write_text("1 2 3\n")
    with pytest.raises(cpp.CppProgramError, match="is not a course tensor file"):
        cpp.run_program(
            programs.program("aoti_run"), package, tmp_path / "bad.tensor", tmp_path / "out.tensor"
        )


def test_wrong_input_shape_is_a_clear_error(
    programs, model_and_package, torchscript_files, tmp_path
):
    _, package = model_and_package
    _, _, scripted = torchscript_files
    wrong = torch.zeros(2, 1, 28, 28)
    rule = r"input shape \[2, 1, 28, 28\] does not match the model's input shape \[-1, 3, 32, 32\]"
    with pytest.raises(cpp.CppProgramError, match=rule):
        cpp.run_model(programs.program("aoti_run"), package, wrong, tmp_path)
    with pytest.raises(cpp.CppProgramError, match=rule):
        cpp.run_model(programs.program("ts_run"), scripted, wrong, tmp_path)


# ---------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_gpu_package_runs_in_cpp_on_cuda(programs, tmp_path):
    """Export and package on the GPU, run in C++ on the GPU; LibTorch must see CUDA."""
    assert cpp.cuda_check(programs.program("cuda_check"))["cuda"]
    model = _net(seed=4).cuda()
    exported = ex.export_model(model, torch.randn(4, 3, 32, 32, device="cuda"))
    package = ex.aoti_package(exported, tmp_path / "net_cuda.pt2")
    x = torch.randn(6, 3, 32, 32, device="cuda")
    got = cpp.run_model(programs.program("aoti_run"), package.path, x, tmp_path, repeat=5)
    assert "device: cuda" in got.stdout
    with torch.no_grad():
        torch.testing.assert_close(got.output, model(x).cpu(), atol=1e-4, rtol=1e-4)
    scripted = ex.torchscript_script(model, tmp_path / "s.pt")
    got = cpp.run_model(programs.program("ts_run"), scripted, x, tmp_path, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(got.output, model(x).cpu(), atol=1e-4, rtol=1e-4)


def test_load_package_on_an_untested_pytorch_probes_in_a_child_first(
    model_and_package, monkeypatch
):
    model, package = model_and_package
    monkeypatch.setattr("course_utils.TESTED_TORCH", "0.0.0")  # as on the GPU node's 2.11
    monkeypatch.setattr(ex, "_PROBED", {})
    loaded = ex.load_package(package)
    assert len(ex._PROBED) == 1, "the package was loaded in a child process first"
    x = torch.randn(3, 3, 32, 32)
    torch.testing.assert_close(loaded(x), model(x))


def test_a_crashing_loader_raises_instead_of_killing_the_kernel(model_and_package, monkeypatch):
    _, package = model_and_package
    monkeypatch.setattr("course_utils.TESTED_TORCH", "0.0.0")
    monkeypatch.setattr(ex, "_PROBED", {})
    # what PyTorch 2.11.0+cu130's loader did on the H100 node
    monkeypatch.setattr(ex, "_PROBE", "import ctypes\nctypes.string_at(0)")
    with pytest.raises(ex.PackageLoadError) as failed:
        ex.load_package(package)
    message = str(failed.value)
    assert f"PyTorch {torch.__version__} crashed (signal 11 (SIGSEGV))" in message
    assert "tested with PyTorch 0.0.0" in message and "C++ loader" in message


@pytest.mark.slow  # a cold CMake build of its own: about 40 s
def test_a_researchers_cpp14_project_builds_with_one_added_line(tmp_path):
    """The documentation's LibTorch example (C++14, CMake 3.0) fails against the course's wheel;
    `include(CourseTorch)` before find_package(Torch) and `course cpp build` make it work."""
    project = tmp_path / "example"
    shutil.copytree(REPO_ROOT / "cpp" / "examples" / "documentation", project)
    original = (project / "CMakeLists.txt").read_text()
    with pytest.raises(cpp.CppProgramError, match="cannot find the CUDA"):
        plain = cpp.configure_command(project, tmp_path / "plain")
        plain.remove(f"-DCMAKE_MODULE_PATH={cpp.cmake_module_dir()}")
        cpp._run(
            plain, "cmake configure", cpp.CONFIGURE_TIMEOUT
        )  # the documentation's way: it fails
    fixed = original.replace(
        "find_package(Torch REQUIRED)", "include(CourseTorch)\nfind_package(Torch REQUIRED)"
    )
    (project / "CMakeLists.txt").write_text(fixed)
    changed = [
        line
        for line in difflib.ndiff(original.splitlines(), fixed.splitlines())
        if line.startswith(("+ ", "- "))
    ]
    assert changed == ["+ include(CourseTorch)"]
    course = str(Path(sys.executable).parent / "course")
    done = subprocess.run(
        [course, "cpp", "build", str(project), str(tmp_path / "build")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run = subprocess.run([str(tmp_path / "build" / "example")], capture_output=True, text=True)
    assert run.returncode == 0 and "[ CPUFloatType{2,3} ]" in run.stdout, run.stderr


TINY_PROJECT = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.18)\nproject(tiny CXX)\n"
    "include(CourseTorch)\nfind_package(Torch REQUIRED)\n"
    'add_executable(tiny tiny.cpp)\ntarget_link_libraries(tiny "${TORCH_LIBRARIES}")\n',
    "tiny.cpp": "#include <c10/util/Exception.h>\nint main() { TORCH_CHECK(true); }\n",
}


def _cache_hits(cache: Path) -> int:
    done = subprocess.run(
        ["ccache", "--print-stats"],
        env={**os.environ, "CCACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        check=True,
    )
    stats = dict(line.split("\t") for line in done.stdout.splitlines() if "\t" in line)
    return int(stats["direct_cache_hit"]) + int(stats["preprocessed_cache_hit"])


@pytest.mark.ccache
def test_equally_deep_projects_in_the_checkout_share_compiled_objects(tmp_path, monkeypatch):
    """What makes lesson 07's first compile a cache hit: `make programs` compiles the
    documentation's example in build/runs/07/example, and the lesson compiles the same source
    in solutions/runs/07/example, as deep in the checkout. Here a small source, compiled in
    two such folders: the second compile is found in the cache."""
    cache = tmp_path / "ccache"
    monkeypatch.setattr(ccache, "compiler_cache", lambda: cache)
    (REPO_ROOT / "build").mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="ccache-test-", dir=REPO_ROOT / "build"))
    try:
        for n, copy in enumerate(("first", "second")):
            project = root / copy / "tiny"
            project.mkdir(parents=True)
            for name, text in TINY_PROJECT.items():
                (project / name).write_text(text)
            cpp.build_project(project, project / "build")
            assert subprocess.run([project / "build" / "tiny"]).returncode == 0
            assert _cache_hits(cache) == n  # the first compiled, the second found it
    finally:
        shutil.rmtree(root)
