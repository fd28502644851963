"""course_utils.cpp without building anything: tensor files, places, the CMake command line and
its time limits, and how a failing build or program is reported (processes.run injected).

The programs themselves are built and run in tests/integration/test_export_cpp.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from course_utils import ccache, cpp, files, paths, processes


def test_tensor_file_round_trip(tmp_path):
    t = torch.randn(2, 3, 4)
    path = cpp.write_tensor(tmp_path / "t.tensor", t)
    assert path.read_bytes().startswith(b"course-tensor float32 3 2 3 4\n")
    assert torch.equal(cpp.read_tensor(path), t)


def test_read_tensor_rejects_other_files(tmp_path):
    (tmp_path / "x").write_bytes(b"hello\n1234")
    with pytest.raises(ValueError, match="is not a tensor file"):
        cpp.read_tensor(tmp_path / "x")
    (tmp_path / "y").write_bytes(b"course-tensor float32 1 4\n" + b"\0" * 8)
    with pytest.raises(ValueError, match=r"needs 4 values, found 2"):
        cpp.read_tensor(tmp_path / "y")


def test_build_root_and_cpp_dir_follow_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    assert paths.build_root() == tmp_path
    assert (cpp.cpp_source_dir() / "aoti_run.cpp").is_file()
    monkeypatch.setenv("COURSE_CPP_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="no CMakeLists.txt in .*COURSE_CPP_DIR"):
        cpp.cpp_source_dir()


@pytest.mark.parametrize(
    ("version", "flags"),
    [
        ("3.25.1", []),  # CMake 3 warns about cmake_minimum_required(VERSION 3.0) and goes on
        ("4.0.0", ["-DCMAKE_POLICY_VERSION_MINIMUM=3.5"]),  # CMake 4 refuses it without this
        ("4.1.2", ["-DCMAKE_POLICY_VERSION_MINIMUM=3.5"]),
    ],
)
def test_policy_floor_only_for_cmake_4(version, flags):
    assert cpp.policy_floor(version) == flags


def test_configure_command_passes_the_floor_to_cmake_4(tmp_path, monkeypatch):
    monkeypatch.setattr(cpp, "cmake_version", lambda: "4.0.3")
    command = cpp.configure_command(tmp_path, tmp_path / "build")
    assert command[:2] == ["cmake", "-S"] and "-DCMAKE_POLICY_VERSION_MINIMUM=3.5" in command
    monkeypatch.setattr(cpp, "cmake_version", lambda: "3.31.6")
    assert not any("POLICY" in arg for arg in cpp.configure_command(tmp_path, tmp_path / "build"))


def test_compiler_launcher_goes_through_ccache_where_it_can(tmp_path):
    cache = tmp_path / "ccache"
    (launcher,) = ccache.compiler_launcher("/usr/bin/ccache", "/usr/bin/env", cache)
    name, value = launcher.split("=", 1)
    assert name == "-DCMAKE_CXX_COMPILER_LAUNCHER"
    assert value.split(";") == [
        "/usr/bin/env",
        f"CCACHE_DIR={cache}",
        f"CCACHE_BASEDIR={paths.REPO_ROOT}",
        "CCACHE_NOHASHDIR=1",
        "/usr/bin/ccache",
    ]
    assert ccache.compiler_launcher(None, "/usr/bin/env", cache) == []
    assert ccache.compiler_launcher("/usr/bin/ccache", None, cache) == []
    # a grading sandbox shows the build folder read-only: compile without the cache
    assert ccache.compiler_launcher("/usr/bin/ccache", "/usr/bin/env", None) == []


def test_inductor_compiler_is_a_link_to_ccache_named_like_the_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    fake_ccache = tmp_path / "ccache-program"
    fake_ccache.touch()
    tools = {"ccache": str(fake_ccache), "g++": "/usr/bin/g++"}
    monkeypatch.setattr(ccache.shutil, "which", tools.get)
    link, environment = ccache.inductor_compiler("g++")
    assert link == str(tmp_path / "ccache" / "bin" / "g++")
    assert Path(link).resolve() == fake_ccache
    assert environment["CCACHE_COMPILER"] == "/usr/bin/g++"
    assert environment["CCACHE_DIR"] == str(tmp_path / "ccache")
    assert "pch_defines" in environment["CCACHE_SLOPPINESS"]  # Inductor's precompiled header
    assert ccache.inductor_compiler("g++")[0] == link  # made once, then found
    assert ccache.inductor_compiler("clang++") is None  # no such compiler here
    monkeypatch.setattr(ccache.shutil, "which", {"g++": "/usr/bin/g++"}.get)
    assert ccache.inductor_compiler("g++") is None  # no ccache


def test_configure_command_compiles_through_ccache_only_where_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(cpp, "cmake_version", lambda: "3.25.1")
    real_which = cpp.shutil.which
    monkeypatch.setattr(
        cpp.shutil, "which", lambda tool: f"/opt/{tool}" if tool == "ccache" else real_which(tool)
    )
    command = cpp.configure_command(tmp_path, tmp_path / "out")
    assert any(a.endswith(";/opt/ccache") for a in command)
    assert f"CCACHE_DIR={tmp_path / 'build' / 'ccache'}" in command[-1]
    monkeypatch.setattr(
        cpp.shutil, "which", lambda tool: None if tool == "ccache" else real_which(tool)
    )
    assert not any("LAUNCHER" in a for a in cpp.configure_command(tmp_path, tmp_path / "out"))


def test_warmed_example_lies_as_deep_in_the_checkout_as_the_lessons(monkeypatch):
    """ccache hashes the checkout's paths relative to the compile's folder: the example that
    make programs compiles shares its objects with the lesson's only at the same depth."""
    monkeypatch.delenv("COURSE_BUILD_DIR", raising=False)  # build/ in the checkout, as make's
    built = []
    monkeypatch.setattr(cpp, "build_project", lambda source, folder: built.append(folder))
    cpp.warm_lesson_example()
    (folder,) = built
    for lessons in ("solutions", "notebooks"):
        lesson_build = Path(lessons, cpp.LESSON_EXAMPLE, "build")
        assert len(folder.relative_to(paths.REPO_ROOT).parts) == len(lesson_build.parts)


def test_documentation_example_is_made_as_the_lesson_makes_it(tmp_path):
    documentation = cpp.cpp_source_dir() / "examples" / "documentation"
    project = cpp.documentation_example(tmp_path / "example")
    lists = (project / "CMakeLists.txt").read_text()
    original = (documentation / "CMakeLists.txt").read_text()
    assert lists.replace("include(CourseTorch)\n", "", 1) == original
    assert lists.index("include(CourseTorch)") < lists.index("find_package(Torch")
    assert (project / "example.cpp").read_text() == (documentation / "example.cpp").read_text()
    added = lists + "add_executable(predict predict.cpp)\n"  # what exercise 07.2 adds
    (project / "CMakeLists.txt").write_text(added)
    cpp.documentation_example(project)
    assert (project / "CMakeLists.txt").read_text() == added
    (project / "CMakeLists.txt").write_text(original)  # the include lost: made again
    cpp.documentation_example(project)
    assert (project / "CMakeLists.txt").read_text() == lists


def test_toolchain_missing_names_the_tool(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert "cmake not found" in cpp.toolchain_missing()
    with pytest.raises(cpp.CppProgramError, match="cannot build C\\+\\+ here: cmake"):
        cpp.build_programs()


@pytest.mark.cpp
def test_unknown_program_and_missing_binary(tmp_path):
    with pytest.raises(ValueError, match=r"unknown C\+\+ program\(s\) \['nope'\]"):
        cpp.build_programs(["nope"], folder=tmp_path)
    with pytest.raises(ValueError, match="build it first with build_programs"):
        cpp.run_program(tmp_path / "aoti_run")


# ---------------------------------------------------------------------------- injected tools


@pytest.fixture
def toolchain(tmp_path, monkeypatch):
    """cmake and c++ on PATH (empty files: processes.run is faked, nothing runs them), and a
    CMake project to build."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("cmake", "c++"):
        (tools / tool).write_text("")
        (tools / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    source = tmp_path / "project"
    source.mkdir()
    (source / "CMakeLists.txt").write_text("include(CourseTorch)\n")
    return source, tmp_path / "build"


CMAKE_VERSION = "cmake version 4.0.3\n\nCMake suite maintained and supported by Kitware.\n"


def test_build_configures_once_then_builds_within_its_limit(toolchain, fake_commands):
    source, folder = toolchain
    fake = fake_commands(
        {
            "cmake --version": CMAKE_VERSION,
            "cmake -S": "-- Configuring done\n",
            "cmake --build": "[2/2] Linking CXX executable example\n",
        }
    )
    built = cpp.build_project(source, folder)
    assert built.configured and not built.up_to_date
    configure, build = fake.calls[1], fake.calls[2]
    assert configure[:3] == ("cmake", "-S", str(source))
    assert "-DCMAKE_POLICY_VERSION_MINIMUM=3.5" in configure  # cmake 4, as answered
    assert build[:3] == ("cmake", "--build", str(folder))
    assert fake.timeouts == [60, cpp.CONFIGURE_TIMEOUT, cpp.BUILD_TIMEOUT]


def test_nothing_to_compile_is_up_to_date(toolchain, fake_commands):
    source, folder = toolchain
    folder.mkdir()
    cache = f"CMAKE_PREFIX_PATH:UNINITIALIZED={torch.utils.cmake_prefix_path}\n"
    (folder / "CMakeCache.txt").write_text(cache)  # configured for this PyTorch: not again
    fake = fake_commands({"cmake --build": "ninja: no work to do.\n"})
    built = cpp.build_project(source, folder, targets=["example"])
    assert not built.configured and built.up_to_date
    assert fake.calls == [
        (
            "cmake",
            "--build",
            str(folder),
            "--parallel",
            str(cpp.allocated_cpus()),
            "--target",
            "example",
        )
    ]


def test_a_failed_or_hung_build_says_how_and_shows_its_last_lines(toolchain, fake_commands):
    source, folder = toolchain
    failed = processes.Finished(("cmake",), 2, "[1/2] Building\n", "main.cpp:3: error: x\n", 1.0)
    fake_commands({"cmake --version": CMAKE_VERSION, "cmake -S": "", "cmake --build": failed})
    with pytest.raises(
        cpp.CppProgramError,
        match=r"cmake --build failed \(exit code 2\):\n"
        r"\[1/2\] Building\nmain.cpp:3: error: x",
    ):
        cpp.build_project(source, folder)
    hung = processes.Finished(("cmake",), None, "[1/2] Building\n", "", 5.0)
    fake_commands({"cmake --version": CMAKE_VERSION, "cmake -S": "", "cmake --build": hung})
    with pytest.raises(cpp.CppProgramError, match="killed after its time limit of 5 s"):
        cpp.build_project(source, folder, timeout=5)


def test_a_folder_is_built_by_one_build_at_a_time(toolchain, fake_commands):
    source, folder = toolchain
    fake = fake_commands({"cmake --version": CMAKE_VERSION, "cmake -S": "", "cmake --build": ""})
    with files.exclusive_lock(cpp.build_lock(folder), timeout=1, holding="in this test"):
        with pytest.raises(TimeoutError, match=r"more than 0\.1 s while building .*build$"):
            cpp.build_project(source, folder, timeout=0.1)
    assert fake.calls == []  # neither configured nor built while another build held it
    cpp.build_project(source, folder)
    assert [c[:2] for c in fake.calls[1:]] == [("cmake", "-S"), ("cmake", "--build")]


def test_run_model_passes_tensor_files_and_reads_the_output(tmp_path, fake_commands):
    program = tmp_path / "aoti_run"
    program.write_text("")

    def aoti_run(command):  # what cpp/aoti_run.cpp does: input file in, output file out
        _, model, inputs, outputs, *options = command
        cpp.write_tensor(outputs, cpp.read_tensor(inputs) * 2)
        return processes.Finished(command, 0, f"model: {model}\nmedian_ms: 1.5\n", "", 0.1)

    fake = fake_commands({"aoti_run": aoti_run})
    x = torch.randn(3, 4)
    result = cpp.run_model(program, "net.pt2", x, tmp_path / "work", repeat=7, threads=2)
    assert torch.equal(result.output, x * 2) and result.median_ms == 1.5
    assert fake.calls[0][4:] == ("--warmup", "5", "--repeat", "7", "--threads", "2")


def test_a_failing_or_hung_program_raises_with_its_message(tmp_path, fake_commands):
    program = tmp_path / "aoti_run"
    program.write_text("")
    error = "aoti_run error: input shape [2, 1, 28, 28] does not match"
    fake_commands({"aoti_run": processes.Finished(("aoti_run",), 1, "", error + "\n", 0.1)})
    with pytest.raises(
        cpp.CppProgramError, match=re.escape(f"aoti_run exited with code 1: {error}")
    ):
        cpp.run_program(program)
    fake_commands({"aoti_run": processes.Finished(("aoti_run",), None, "", "", 9.0)})
    with pytest.raises(cpp.CppProgramError, match=r"killed after its time limit \(9 s\)"):
        cpp.run_program(program, timeout=9)


def test_median_ms_times_each_call_alone_as_the_cpp_programs_do(monkeypatch):
    """Warm-up calls untimed, then the middle one of the sorted call times (tensor_io.h takes
    times[size / 2]), with torch's threads as asked meanwhile and restored after."""
    clock = iter([0.0, 0.003, 1.0, 1.001, 2.0, 2.010, 3.0, 3.002])  # calls of 3, 1, 10, 2 ms
    monkeypatch.setattr(cpp.time, "perf_counter", lambda: next(clock))
    calls, threads = [], torch.get_num_threads()
    median = cpp.median_ms(
        lambda x: calls.append(torch.get_num_threads()), 0, warmup=2, repeat=4, threads=1
    )
    assert median == pytest.approx(3.0) and calls == [1] * 6
    assert torch.get_num_threads() == threads
    with pytest.raises(ValueError, match="repeat=0 must be >= 1"):
        cpp.median_ms(print, repeat=0)


def test_time_ratio_is_a_difference_only_where_the_rounds_do_not_overlap():
    assert cpp.time_ratio([3.9, 4.0, 4.2], [2.7, 2.8, 3.0]) == (pytest.approx(4.0 / 2.8), True)
    ratio, differs = cpp.time_ratio([2.7, 3.9, 2.8], [2.9, 2.8, 3.0])
    assert ratio == pytest.approx(2.8 / 2.9) and not differs
    with pytest.raises(ValueError, match="at least one round"):
        cpp.time_ratio([], [1.0])


def _programs(folder, names=cpp.PROGRAMS):
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("")
    return folder


def test_a_grading_run_uses_the_programs_its_grader_built(tmp_path, monkeypatch, fake_commands):
    """In the sandbox, `course grade` shows its own build/cpp read-only: nothing is built (no
    command runs: fake_commands has no answer), and those count as the course's programs."""
    fake = fake_commands({})
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path / "run-build"))
    prebuilt = _programs(tmp_path / "grader" / "cpp")
    monkeypatch.setenv(cpp.PREBUILT_VARIABLE, str(prebuilt))
    build = cpp.build_programs(["aoti_run"])
    assert (build.folder, build.up_to_date, build.seconds) == (prebuilt, True, 0.0)
    assert fake.calls == []
    assert cpp.is_course_program(build.program("aoti_run"))
    assert cpp.is_course_program(tmp_path / "run-build" / "cpp" / "aoti_run")  # built in the run
    assert not cpp.is_course_program(_programs(tmp_path / "mine", ["predict"]) / "predict")


def test_a_prebuilt_folder_missing_a_program_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv(cpp.PREBUILT_VARIABLE, str(_programs(tmp_path, ["aoti_run"])))
    assert cpp.prebuilt_programs() is None
    monkeypatch.delenv(cpp.PREBUILT_VARIABLE)
    assert cpp.prebuilt_programs() is None
