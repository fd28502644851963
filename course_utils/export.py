"""From a trained model to a C++ program: torch.export, AOTInductor, legacy TorchScript, CMake.

The current route: `export_model` (torch.export with a dynamic batch dimension) ->
`aoti_package` (AOTInductor compiles it into a self-contained .pt2) -> the C++ program
cpp/aoti_run.cpp loads it with `AOTIModelPackageLoader`. The legacy route, TorchScript
(`torchscript_trace`, `torchscript_script`, cpp/ts_run.cpp), is deprecated in favour of
torch.export; it stays here because clusters still run models saved that way.

The C++ programs in cpp/ are built with CMake against the LibTorch inside the installed wheel
(`torch.utils.cmake_prefix_path`) into build/cpp, incrementally; the inductor cache and compiled
packages are kept under build/ too, so a second run of the lesson is fast. Tensors travel
between Python and C++ as tensor files (`write_tensor`, `read_tensor`, cpp/tensor_io.h).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import course_utils
from course_utils.environment import patched_environ
from course_utils.hpc import allocated_cpus
from course_utils.paths import REPO_ROOT
from course_utils.processes import exit_description

PROGRAMS = ("cuda_check", "aoti_run", "ts_run")
SAMPLE_SHAPE = (3, 32, 32)  # one CIFAR-10 image
SHAPE_KEY = "course.input_shape"  # metadata key the C++ loaders check inputs against
TENSOR_MAGIC = "course-tensor"


class CppProgramError(RuntimeError):
    """A C++ program exited with an error; the message carries what it printed on stderr."""


# ---------------------------------------------------------------------------- places


def cpp_source_dir() -> Path:
    """The C++ sources: env COURSE_CPP_DIR, else cpp/ in the course repository."""
    folder = Path(os.environ.get("COURSE_CPP_DIR") or REPO_ROOT / "cpp")
    if not (folder / "CMakeLists.txt").is_file():
        raise ValueError(
            f"no CMakeLists.txt in {folder}: run from a checkout of the course repository "
            "(pip install -e .) or set COURSE_CPP_DIR to its cpp/ folder"
        )
    return folder


def build_root() -> Path:
    """The project build folder (gitignored): env COURSE_BUILD_DIR, else build/ in the repo."""
    return Path(os.environ.get("COURSE_BUILD_DIR") or REPO_ROOT / "build")


@contextlib.contextmanager
def inductor_cache(path: str | os.PathLike | None = None):
    """Point TORCHINDUCTOR_CACHE_DIR at `path` (default build/inductor-cache), then restore it."""
    path = Path(path or build_root() / "inductor-cache")
    path.mkdir(parents=True, exist_ok=True)
    with patched_environ(TORCHINDUCTOR_CACHE_DIR=str(path.resolve())):
        yield path


# ---------------------------------------------------------------------------- tensor files


def write_tensor(path: str | os.PathLike, tensor: torch.Tensor) -> Path:
    """Write a float32 tensor file: a header line, then raw little-endian values (C order)."""
    t = tensor.detach().to("cpu", torch.float32).contiguous()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = " ".join([TENSOR_MAGIC, "float32", str(t.dim()), *map(str, t.shape)]) + "\n"
    with open(path, "wb") as f:
        f.write(header.encode())
        f.write(t.numpy().astype("<f4", copy=False).tobytes())
    return path


def read_tensor(path: str | os.PathLike) -> torch.Tensor:
    """Read a tensor file written by `write_tensor` or by a C++ program."""
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


# ---------------------------------------------------------------------------- export


def export_model(
    model: torch.nn.Module, example: torch.Tensor, dynamic_batch: bool = True, max_batch: int = 4096
):
    """torch.export the model in eval mode; dimension 0 is dynamic (1..max_batch) if asked.

    The example's batch must be at least 2: torch.export specializes sizes 0 and 1.
    """
    if dynamic_batch and example.shape[0] < 2:
        raise ValueError(
            f"example batch size {example.shape[0]} is specialized by torch.export; "
            "use an example with a batch of 2 or more for a dynamic batch dimension"
        )
    model.eval()
    dynamic_shapes = None
    if dynamic_batch:
        dynamic_shapes = ({0: torch.export.Dim("batch", min=1, max=max_batch)},)
    return torch.export.export(model, (example,), dynamic_shapes=dynamic_shapes)


def export_error(module: torch.nn.Module, example: torch.Tensor) -> str | None:
    """Why torch.export refuses `module` (the exception's type), or None when it exports.

    torch.export prints and logs the partial graph on stderr when it fails; silenced here: the
    error's type is what a reader needs.
    """
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            torch.export.export(module, (example,))
    except Exception as e:
        return type(e).__name__
    finally:
        logging.disable(logging.NOTSET)
    return None


def input_shape_spec(exported) -> str:
    """'-1,3,32,32': the exported program's first input shape, -1 for a dynamic size."""
    spec = exported.graph_signature.user_inputs[0]
    node = next(n for n in exported.graph.nodes if n.name == spec)
    return ",".join(str(d) if isinstance(d, int) else "-1" for d in node.meta["val"].shape)


def _package_key(exported, device: str) -> str:
    """Hash of what decides the compiled package: graph, weights, shapes, device, PyTorch."""
    h = hashlib.sha256()
    for part in (
        torch.__version__,
        device,
        str(exported.graph),
        str(exported.range_constraints),
        input_shape_spec(exported),
    ):
        h.update(part.encode())
    for name, value in sorted(exported.state_dict.items()):
        h.update(name.encode())
        h.update(value.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Package:
    path: Path
    seconds: float  # compile time now; 0.0 when an identical package was reused
    reused: bool


def aoti_package(exported, path: str | os.PathLike, force: bool = False) -> Package:
    """Compile an ExportedProgram with AOTInductor into the .pt2 file `path`.

    The expected input shape goes into the package's metadata for the C++ loader. An identical
    package compiled earlier (same graph, weights, device and PyTorch) is reused from
    build/aoti-packages unless `force`; the inductor cache lives in build/inductor-cache.
    """
    from torch._inductor import aoti_compile_and_package

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    device = _device_of(exported)
    store = build_root() / "aoti-packages" / f"{_package_key(exported, device)}.pt2"
    if store.is_file() and not force:
        shutil.copyfile(store, path)
        return Package(path, 0.0, True)
    configs = {"aot_inductor.metadata": {SHAPE_KEY: input_shape_spec(exported)}}
    start = time.perf_counter()
    with inductor_cache():
        aoti_compile_and_package(exported, package_path=str(path), inductor_configs=configs)
    seconds = time.perf_counter() - start
    store.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, store)
    return Package(path, seconds, False)


def _device_of(exported) -> str:
    devices = {t.device.type for t in exported.state_dict.values()}
    return "cuda" if "cuda" in devices else "cpu"


class PackageLoadError(RuntimeError):
    """This PyTorch cannot load the package in Python; the message says why and what to do."""


# Loads a package in a child process, so a loader that crashes takes the child down, not the
# learner's kernel (PyTorch 2.11.0+cu130 segfaulted here on a CPU package, on an H100 node).
_PROBE = "import sys\nfrom torch._inductor import aoti_load_package\naoti_load_package(sys.argv[1])"
_PROBED: dict[tuple[str, float], None] = {}


def _probe_load(path: Path) -> None:
    """Load `path` in a child process first; raise PackageLoadError when the child fails."""
    key = (str(path.resolve()), path.stat().st_mtime)
    if key in _PROBED:
        return
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True, timeout=600
    )
    if done.returncode == 0:
        _PROBED[key] = None
        return
    if done.returncode < 0:
        how = f"crashed ({exit_description(done.returncode)})"
    else:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        how = f"failed ({tail})"
    raise PackageLoadError(
        f"PyTorch {torch.__version__} {how} loading the AOTInductor package {path} in a test "
        f"process; this kernel was spared. The course is tested with PyTorch "
        f"{course_utils.TESTED_TORCH}, where the package loads. Run it with the C++ loader "
        "(build_programs and run_model, below) or install the tested PyTorch."
    )


def load_package(path: str | os.PathLike):
    """The compiled .pt2 as a Python callable (the same code the C++ loader runs).

    On a PyTorch other than the tested one the package is first loaded in a child process: a
    loader that crashes raises PackageLoadError, naming both versions, instead of killing the
    notebook's kernel.
    """
    from torch._inductor import aoti_load_package

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no AOTInductor package at {path}; create it with aoti_package()")
    if torch.__version__.split("+")[0] != course_utils.TESTED_TORCH:
        _probe_load(path)
    return aoti_load_package(str(path))


# ---------------------------------------------------------------------------- TorchScript


_NOTED: set[str] = set()  # TorchScript warnings already shown in this process
_DEPRECATED = re.compile(r"^`([\w.]+)` is deprecated")


@contextlib.contextmanager
def _torchscript_notes(*apis: str):
    """Catch the warnings TorchScript emits and show each one once, in one short stdout line.

    torch.jit emits a FutureWarning per function on every call (deprecated in favour of
    torch.export); as warnings they would go to stderr once per location and repeat in every
    cell. Deprecations are gathered into one line per call that names what is new; other
    warnings (a TracerWarning) show their first sentence, once per process. `apis` are the
    calls the block makes: PyTorch 2.6 does not warn, and the note names them itself.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    deprecated, others = [], []
    for w in caught:
        text = str(w.message).strip().splitlines()[0]
        m = _DEPRECATED.match(text)
        if m and issubclass(w.category, FutureWarning):
            deprecated.append(m[1])
        else:
            others.append(f"{w.category.__name__}: {text.split('. ')[0].rstrip('.')}")
    if not deprecated:  # older PyTorch does not warn: say it anyway
        deprecated = [api for api in apis if f"legacy:{api}" not in _NOTED]
    new = [name for name in dict.fromkeys(deprecated) if name not in _NOTED]
    if new:
        print(f"note: deprecated, use torch.export: {', '.join(new)}")
    for message in dict.fromkeys(others):
        if message not in _NOTED:
            print(f"note: {message}")
    _NOTED.update(new, others, [f"legacy:{api}" for api in apis])


def torchscript_load(path: str | os.PathLike):
    """Legacy: torch.jit.load a TorchScript file, its deprecation warning printed as one line."""
    with _torchscript_notes("torch.jit.load"):
        return torch.jit.load(str(path))


def _save_torchscript(module, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = {SHAPE_KEY: ",".join(["-1", *map(str, SAMPLE_SHAPE)])}
    torch.jit.save(module, str(path), _extra_files=extra)
    return path


def torchscript_trace(model: torch.nn.Module, example: torch.Tensor, path) -> Path:
    """Legacy: torch.jit.trace (records one run; Python control flow is frozen) and save."""
    model.eval()
    with _torchscript_notes("torch.jit.trace", "torch.jit.save"):
        return _save_torchscript(torch.jit.trace(model, example), path)


def torchscript_script(model: torch.nn.Module, path) -> Path:
    """Legacy: torch.jit.script (compiles the Python source, keeps control flow) and save."""
    model.eval()
    with _torchscript_notes("torch.jit.script", "torch.jit.save"):
        return _save_torchscript(torch.jit.script(model), path)


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
        return f"C++ programs {what} in {self.folder} ({self.seconds:.1f} s)"


def _run(cmd: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
        raise CppProgramError(f"{what} failed (exit code {done.returncode}):\n{tail}")
    return done


def cmake_module_dir() -> Path:
    """cpp/cmake: CourseTorch.cmake, the one-line include for any project using LibTorch."""
    return cpp_source_dir() / "cmake"


def cmake_version() -> str:
    """The version of the cmake on PATH, e.g. "3.25.1" (from "cmake version 3.25.1")."""
    if shutil.which("cmake") is None:
        raise CppProgramError(f"cannot build C++ here: {toolchain_missing()}")
    out = subprocess.run(["cmake", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.split()[2]


def policy_floor(version: str) -> list[str]:
    """CMake 4 refuses a project whose cmake_minimum_required is below 3.5 (the documentation's
    example asks for 3.0); CMAKE_POLICY_VERSION_MINIMUM lets it configure. CMake 3 only warns,
    and does not know the variable, so it gets nothing."""
    return ["-DCMAKE_POLICY_VERSION_MINIMUM=3.5"] if int(version.split(".")[0]) >= 4 else []


def configure_command(source: Path, folder: Path, use_cuda_toolkit: bool = False) -> list[str]:
    """The cmake command that configures `source` in `folder` against this PyTorch's LibTorch."""
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    return [
        "cmake", "-S", str(source), "-B", str(folder), *generator,
        f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
        f"-DCMAKE_MODULE_PATH={cmake_module_dir()}",
        f"-DCOURSE_USE_CUDA_TOOLKIT={'ON' if use_cuda_toolkit else 'OFF'}",
        *policy_floor(cmake_version()),
    ]  # fmt: skip


def _configure(source: Path, folder: Path, use_cuda_toolkit: bool) -> None:
    cache = folder / "CMakeCache.txt"
    prefix = torch.utils.cmake_prefix_path
    if cache.is_file() and f"CMAKE_PREFIX_PATH:UNINITIALIZED={prefix}\n" in cache.read_text():
        return
    shutil.rmtree(folder, ignore_errors=True)  # another PyTorch: start clean
    _run(configure_command(source, folder, use_cuda_toolkit), "cmake configure")


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
) -> Build:
    """Configure (once) and build any CMake project against this PyTorch's LibTorch.

    Its CMakeLists.txt says `include(CourseTorch)` before `find_package(Torch REQUIRED)` (see
    cpp/cmake/CourseTorch.cmake); only what changed is rebuilt. `targets`: all when empty.
    """
    source, folder = Path(source), Path(folder)
    start = time.perf_counter()
    configured = not (folder / "CMakeCache.txt").is_file()
    configure_project(source, folder, use_cuda_toolkit)
    chosen = ["--target", *targets] if targets else []
    done = _run(
        ["cmake", "--build", str(folder), "--parallel", str(allocated_cpus()), *chosen],
        "cmake --build",
    )
    up_to_date = "no work to do" in done.stdout or "Linking" not in done.stdout
    return Build(folder, time.perf_counter() - start, configured, up_to_date)


def build_programs(
    targets=PROGRAMS, folder: str | os.PathLike | None = None, use_cuda_toolkit: bool = False
) -> Build:
    """Configure (once) and build the course's C++ programs in build/cpp."""
    unknown = set(targets) - set(PROGRAMS)
    if unknown:
        raise ValueError(f"unknown C++ program(s) {sorted(unknown)}; choose from {PROGRAMS}")
    folder = folder or build_root() / "cpp"
    return build_project(cpp_source_dir(), folder, targets, use_cuda_toolkit)


# ---------------------------------------------------------------------------- running


def run_program(program: str | os.PathLike, *args, timeout: float = 300) -> str:
    """Run a built C++ program; return its stdout, or raise CppProgramError with its stderr."""
    program = Path(program)
    if not program.is_file():
        raise ValueError(f"no program at {program}; build it first with build_programs()")
    done = subprocess.run(
        [str(program), *map(str, args)], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
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


def cuda_check(program: str | os.PathLike, seed: int = 0) -> dict:
    """Run cuda_check: whether LibTorch sees CUDA, the device, and its random tensor."""
    fields = parse_fields(run_program(program, seed))
    values = [float(v) for v in fields["tensor"].split()]
    return {
        "cuda": fields["cuda available"] == "true",
        "devices": int(fields["cuda devices"]),
        "device": fields["device"],
        "tensor": torch.tensor(values).reshape(2, 3),
    }
