"""The C++ side of lesson 07: build programs with CMake against LibTorch, run them, pass tensors.

The C++ programs in cpp/ are built with CMake against the LibTorch inside the installed wheel
(`torch.utils.cmake_prefix_path`) into build/cpp, incrementally: `build_programs`, or
`build_project` for any CMake project whose CMakeLists.txt says `include(CourseTorch)`
(`course cpp build` on the command line). Tensors travel between Python and C++ as tensor files
(`write_tensor`, `read_tensor`, cpp/tensor_io.h); `run_model` runs aoti_run or ts_run on a
batch that way; `median_ms` times Python the way the programs time themselves, `time_ratio` compares
rounds of such timings. What the programs
load comes from `course_utils.export`.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from course_utils import ccache, processes
from course_utils.files import atomic_write, exclusive_lock, write_text_if_changed
from course_utils.hpc import allocated_cpus
from course_utils.paths import REPO_ROOT, build_root, shown

if TYPE_CHECKING:
    import torch

# torch is imported by the functions that use it: `course grade` reads where the C++ sources
# and programs are (to show them to a sandboxed run) and must not pay seconds of torch's import.

PROGRAMS = ("cuda_check", "aoti_run", "ts_run")
TENSOR_MAGIC = "course-tensor"
# Seconds: a configure takes under one, a cold build of the course's programs 15-40 on 2 cores;
# the limits only stop a build that hangs (a compiler waiting on a lock, a full disk).
CONFIGURE_TIMEOUT, BUILD_TIMEOUT, PROGRAM_TIMEOUT = 300, 1800, 300


class CppProgramError(RuntimeError):
    """A C++ program or a build step failed; the message carries what it printed."""


def cpp_source_dir() -> Path:
    """The C++ sources: env COURSE_CPP_DIR, else cpp/ in the course repository."""
    folder = Path(os.environ.get("COURSE_CPP_DIR") or REPO_ROOT / "cpp")
    if not (folder / "CMakeLists.txt").is_file():
        raise ValueError(
            f"no CMakeLists.txt in {folder}: run from a checkout of the course repository "
            "(pip install -e .) or set COURSE_CPP_DIR to its cpp/ folder"
        )
    return folder


# ---------------------------------------------------------------------------- tensor files


def write_tensor(path: str | os.PathLike, tensor: torch.Tensor) -> Path:
    """Write a float32 tensor file: a header line, then raw little-endian values (C order)."""
    import torch

    t = tensor.detach().to("cpu", torch.float32).contiguous()
    header = " ".join([TENSOR_MAGIC, "float32", str(t.dim()), *map(str, t.shape)]) + "\n"
    values = t.numpy().astype("<f4", copy=False).tobytes()
    return atomic_write(path, lambda f: f.write(header.encode() + values))


def read_tensor(path: str | os.PathLike) -> torch.Tensor:
    """Read a tensor file written by `write_tensor` or by a C++ program."""
    import torch

    with open(path, "rb") as f:
        header = f.readline().decode(errors="replace").split()
        data = f.read()
    if len(header) < 3 or header[:2] != [TENSOR_MAGIC, "float32"]:
        raise ValueError(f"{path} is not a tensor file (header {' '.join(header)!r})")
    shape = tuple(int(d) for d in header[3:])
    values = np.frombuffer(data, dtype="<f4")
    if values.size != int(np.prod(shape)):
        raise ValueError(
            f"{path}: shape {shape} needs {np.prod(shape)} values, found {values.size}"
        )
    return torch.from_numpy(values.reshape(shape).copy())


# ---------------------------------------------------------------------------- building


def toolchain_missing() -> str | None:
    """Why the C++ programs cannot be built here (a missing tool), or None when they can."""
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            return f"{tool} not found on PATH (install cmake and a C++20 compiler, e.g. g++ >= 10)"
    return None


@dataclass(frozen=True)
class Build:
    folder: Path
    seconds: float
    configured: bool  # cmake configure ran (first build, or PyTorch changed)
    up_to_date: bool  # nothing needed compiling

    def program(self, name: str) -> Path:
        return self.folder / name

    def __str__(self) -> str:
        what = "up to date" if self.up_to_date else "built"
        return f"C++ programs {what} in {shown(self.folder)} ({self.seconds:.1f} s)"


def _run(command: list[str], what: str, timeout: float) -> processes.Finished:
    """Run a build step; CppProgramError with the last lines it printed when it fails."""
    done = processes.run(command, timeout=timeout)
    if not done.ok:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
        limit = f" of {timeout:g} s" if done.timed_out else ""
        raise CppProgramError(f"{what} failed ({done.describe()}{limit}):\n{tail}")
    return done


def cmake_module_dir() -> Path:
    """cpp/cmake: CourseTorch.cmake, the one-line include for any project using LibTorch."""
    return cpp_source_dir() / "cmake"


def cmake_version() -> str:
    """The version of the cmake on PATH, e.g. "3.25.1" (from "cmake version 3.25.1")."""
    if shutil.which("cmake") is None:
        raise CppProgramError(f"cannot build C++ here: {toolchain_missing()}")
    return _run(["cmake", "--version"], "cmake --version", 60).stdout.split()[2]


def policy_floor(version: str) -> list[str]:
    """CMake 4 refuses a project whose cmake_minimum_required is below 3.5 (the documentation's
    example asks for 3.0); CMAKE_POLICY_VERSION_MINIMUM lets it configure. CMake 3 only warns,
    and does not know the variable, so it gets nothing."""
    return ["-DCMAKE_POLICY_VERSION_MINIMUM=3.5"] if int(version.split(".")[0]) >= 4 else []


def configure_command(source: Path, folder: Path, use_cuda_toolkit: bool = False) -> list[str]:
    """The cmake command that configures `source` in `folder` against this PyTorch's LibTorch
    (through ccache where it is installed: course_utils.ccache)."""
    import torch

    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    return [
        "cmake",
        "-S",
        str(source),
        "-B",
        str(folder),
        *generator,
        f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
        f"-DCMAKE_MODULE_PATH={cmake_module_dir()}",
        f"-DCOURSE_USE_CUDA_TOOLKIT={'ON' if use_cuda_toolkit else 'OFF'}",
        *policy_floor(cmake_version()),
        *ccache.launcher_here(),
    ]


def _configure(source: Path, folder: Path, use_cuda_toolkit: bool) -> None:
    import torch

    cache = folder / "CMakeCache.txt"
    prefix = torch.utils.cmake_prefix_path
    if cache.is_file() and f"CMAKE_PREFIX_PATH:UNINITIALIZED={prefix}\n" in cache.read_text():
        return
    shutil.rmtree(folder, ignore_errors=True)  # another PyTorch: start clean
    command = configure_command(source, folder, use_cuda_toolkit)
    _run(command, "cmake configure", CONFIGURE_TIMEOUT)


def configure_project(
    source: str | os.PathLike, folder: str | os.PathLike, use_cuda_toolkit: bool = False
) -> None:
    """Configure any CMake project against this PyTorch's LibTorch (see `build_project`)."""
    missing = toolchain_missing()
    if missing:
        raise CppProgramError(f"cannot build C++ here: {missing}")
    source, folder = Path(source), Path(folder)
    if not (source / "CMakeLists.txt").is_file():
        raise ValueError(f"no CMakeLists.txt in {source}; pass the folder of a CMake project")
    _configure(source, folder, use_cuda_toolkit)


def build_project(
    source: str | os.PathLike,
    folder: str | os.PathLike,
    targets=(),
    use_cuda_toolkit: bool = False,
    timeout: float = BUILD_TIMEOUT,
) -> Build:
    """Configure (once) and build any CMake project against this PyTorch's LibTorch.

    Its CMakeLists.txt says `include(CourseTorch)` before `find_package(Torch REQUIRED)` (see
    cpp/cmake/CourseTorch.cmake); only what changed is rebuilt. `targets`: all when empty. A
    build still running after `timeout` seconds is ended, compilers and all.
    """
    source, folder = Path(source), Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    # One build of a folder at a time: two kernels, or a test beside a lesson, building build/cpp
    # at once would configure over each other and race in ninja's logs. The lock file sits beside
    # the folder, which a configure for another PyTorch removes.
    with exclusive_lock(build_lock(folder), timeout, f"while building {shown(folder)}"):
        configured = not (folder / "CMakeCache.txt").is_file()
        configure_project(source, folder, use_cuda_toolkit)
        chosen = ["--target", *targets] if targets else []
        command = ["cmake", "--build", str(folder), "--parallel", str(allocated_cpus()), *chosen]
        done = _run(command, "cmake --build", timeout)
    up_to_date = "no work to do" in done.stdout or "Linking" not in done.stdout
    return Build(folder, done.seconds, configured, up_to_date)


def build_lock(folder: Path) -> Path:
    """The lock file that `build_project` holds while it builds `folder`."""
    return folder.with_name(f".{folder.name}.lock")


def build_programs(
    targets=PROGRAMS, folder: str | os.PathLike | None = None, use_cuda_toolkit: bool = False
) -> Build:
    """Configure (once) and build the course's C++ programs in build/cpp. In a grading run
    whose grader built them beforehand (PREBUILT_VARIABLE names that read-only folder), those
    are the programs: each learner's run would otherwise build the same ones cold."""
    unknown = set(targets) - set(PROGRAMS)
    if unknown:
        raise ValueError(f"unknown C++ program(s) {sorted(unknown)}; choose from {PROGRAMS}")
    prebuilt = prebuilt_programs()
    if folder is None and prebuilt and not use_cuda_toolkit:
        return Build(prebuilt, 0.0, False, True)
    folder = folder or programs_dir()
    return build_project(cpp_source_dir(), folder, targets, use_cuda_toolkit)


# Where lesson 07 makes the documentation's example project, beside its notebook: RUNS / "example".
LESSON_EXAMPLE = Path("runs", "07", "example")


def documentation_example(folder: str | os.PathLike) -> Path:
    """Make the documentation's example project in `folder` as lesson 07 does: its example.cpp,
    and its CMakeLists.txt with include(CourseTorch) before find_package(Torch), keeping lines
    added after the documentation's (exercise 07.2 adds a target). Returns `folder`."""
    folder = Path(folder)
    documentation = cpp_source_dir() / "examples" / "documentation"
    cmake = (documentation / "CMakeLists.txt").read_text()
    fixed = cmake.replace("find_package(Torch", "include(CourseTorch)\nfind_package(Torch")
    lists = folder / "CMakeLists.txt"
    if not (lists.is_file() and lists.read_text().startswith(fixed)):
        write_text_if_changed(lists, fixed)
    write_text_if_changed(folder / "example.cpp", (documentation / "example.cpp").read_text())
    return folder


def warm_lesson_example() -> Build:
    """Build the documentation's example in build/runs/07/example, as `make programs` does: its
    compile of torch/torch.h, the lesson's longest step cold (about 20 s on 2 cores), then waits
    in the compiler cache for the lesson's own build (course_utils.ccache says why it matches)."""
    project = documentation_example(build_root() / LESSON_EXAMPLE)
    return build_project(project, project / "build")


def programs_dir() -> Path:
    """Where `build_programs` builds the course's programs: build/cpp."""
    return build_root() / "cpp"


def holds_programs(folder: str | os.PathLike) -> bool:
    """`folder` holds every one of the course's programs (built, not merely configured)."""
    return all((Path(folder) / name).is_file() for name in PROGRAMS)


# Set by `course grade` in a sandboxed run of lesson 07: the grader's own build/cpp, read-only.
PREBUILT_VARIABLE = "COURSE_PREBUILT_PROGRAMS"


def prebuilt_programs() -> Path | None:
    """The folder of the course's programs built beforehand, when it holds all of them."""
    folder = os.environ.get(PREBUILT_VARIABLE)
    return Path(folder) if folder and holds_programs(folder) else None


def is_course_program(program: str | os.PathLike) -> bool:
    """`program` is one of the course's own programs (built here, or beforehand by a grader),
    not one a learner built from a project of their own."""
    folders = [programs_dir(), prebuilt_programs()]
    where = Path(program).resolve().parent
    return any(f is not None and where == f.resolve() for f in folders)


# ---------------------------------------------------------------------------- running


def run_program(program: str | os.PathLike, *args, timeout: float = PROGRAM_TIMEOUT) -> str:
    """Run a built C++ program; return its stdout, or raise CppProgramError with its stderr."""
    program = Path(program)
    if not program.is_file():
        raise ValueError(f"no program at {program}; build it first with build_programs()")
    done = processes.run([program, *args], timeout=timeout)
    if done.timed_out:
        raise CppProgramError(f"{program.name} was {done.describe()} ({timeout:g} s)")
    if not done.ok:
        raise CppProgramError(
            f"{program.name} exited with code {done.returncode}: {done.stderr.strip()}"
        )
    return done.stdout


def parse_fields(stdout: str) -> dict[str, str]:
    """'key: value' lines printed by the C++ programs, as a dict."""
    return dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)


@dataclass(frozen=True)
class CppResult:
    output: torch.Tensor
    median_ms: float | None  # the program's own timing, when asked for
    stdout: str


def run_model(
    program: str | os.PathLike,
    model_path,
    inputs: torch.Tensor,
    workdir,
    repeat: int = 0,
    warmup: int = 5,
    device: str | None = None,
    threads: int | None = None,
) -> CppResult:
    """Run aoti_run or ts_run on `inputs` through tensor files in `workdir`; read the output.

    `repeat` > 0 makes the program time itself (median of `repeat` calls after `warmup`);
    `threads` sets its intra-op (OpenMP) threads, else LibTorch's default.
    """
    workdir = Path(workdir)
    input_file = write_tensor(workdir / "input.tensor", inputs)
    output_file = workdir / "output.tensor"
    output_file.unlink(missing_ok=True)
    options = ["--warmup", warmup, "--repeat", repeat]
    options += ["--device", device] if device else []
    options += ["--threads", threads] if threads else []
    stdout = run_program(program, model_path, input_file, output_file, *options)
    fields = parse_fields(stdout)
    median = float(fields["median_ms"]) if "median_ms" in fields else None
    return CppResult(read_tensor(output_file), median, stdout)


def median_ms(fn, *args, warmup: int = 5, repeat: int = 50, threads: int | None = None) -> float:
    """Python's counterpart of the C++ programs' own timing (`course::median_ms` in
    cpp/tensor_io.h, what `run_model(..., repeat=N)` reports): `warmup` untimed calls of
    `fn(*args)`, then the median wall time of `repeat` calls, each timed alone, in milliseconds.
    Timing Python this way and C++ that way times them alike. `threads`: torch's intra-op
    threads meanwhile (as the programs' --threads), restored after. CPU work only: nothing here
    waits for a GPU."""
    import torch

    if repeat < 1 or warmup < 0:
        raise ValueError(f"repeat={repeat} must be >= 1 and warmup={warmup} >= 0")
    saved = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            for _ in range(warmup):
                fn(*args)
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                fn(*args)
                times.append((time.perf_counter() - start) * 1e3)
    finally:
        torch.set_num_threads(saved)
    return sorted(times)[len(times) // 2]  # the element tensor_io.h's median_ms takes


def time_ratio(a: list[float], b: list[float]) -> tuple[float, bool]:
    """Times of two routes measured in alternating rounds: a's median round over b's, and
    whether that is a difference measured (the two ranges of rounds do not overlap)."""
    if not a or not b:
        raise ValueError("time_ratio needs at least one round of each route")
    differs = max(a) < min(b) or min(a) > max(b)
    return statistics.median(a) / statistics.median(b), differs


def cuda_check(program: str | os.PathLike, seed: int = 0) -> dict:
    """Run cuda_check: whether LibTorch sees CUDA, the device, and its random tensor."""
    import torch

    fields = parse_fields(run_program(program, seed))
    values = [float(v) for v in fields["tensor"].split()]
    return {
        "cuda": fields["cuda available"] == "true",
        "devices": int(fields["cuda devices"]),
        "device": fields["device"],
        "tensor": torch.tensor(values).reshape(2, 3),
    }
