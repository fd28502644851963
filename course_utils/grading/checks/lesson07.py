"""Checkers of lesson 07, deploying to C++.

07.1 and 07.2 run what the learner built: the course's C++ loader on the learner's own package
(two batch sizes), and the learner's own C++ program on a fresh batch; both are compared with
Python. They need cmake and a C++ compiler, and say so where one is missing. 07.3 has held-out
cases: other GPUs, builds and drivers, decided by `course doctor`'s architecture rule.
"""

import tempfile
from pathlib import Path

import torch

from course_utils import cpp, export, files
from course_utils.doctor.gpu import arch_supported
from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out
from course_utils.models import Net
from course_utils.paths import build_root


def _toolchain() -> None:
    """Say why C++ cannot be built here (a missing tool, no course sources), as a failed check."""
    missing = cpp.toolchain_missing()
    try:
        cpp.cpp_source_dir()
    except ValueError as e:
        missing = missing or str(e)
    if missing:
        raise CheckFailed(f"this check builds and runs C++, but {missing}")


def _batch(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


def _model() -> Net:
    torch.manual_seed(0)
    return Net().eval()


def _package() -> Path:
    """The check's model as a package: compiled once, then reused from build/aoti-packages."""
    exported = export.export_model(_model(), _batch(2, seed=0))
    return export.aoti_package(exported, build_root() / "exercise-07" / "net.pt2").path


def _project() -> Path:
    """A learner's project as the lesson makes it: the documentation's example plus
    include(CourseTorch), in build/ so that its build stays incremental between checks."""
    documentation = cpp.cpp_source_dir() / "examples" / "documentation"
    project = build_root() / "exercise-07" / "project"
    cmake = (documentation / "CMakeLists.txt").read_text()
    fixed = cmake.replace("find_package(Torch", "include(CourseTorch)\nfind_package(Torch")
    lists = project / "CMakeLists.txt"
    if not (lists.is_file() and lists.read_text().startswith(fixed)):  # keep what 07.2 added
        files.write_text_if_changed(lists, fixed)
    example = (documentation / "example.cpp").read_text()
    files.write_text_if_changed(project / "example.cpp", example)
    return project


def _same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    expect(
        tuple(got.shape) == tuple(want.shape),
        f"an output of shape {tuple(want.shape)}",
        tuple(got.shape),
        what,
    )
    diff = (got - want).abs().max().item()
    expect(diff <= 1e-5, "outputs within 1e-5 of Python's", f"a difference of {diff:.2g}", what)


@exercise("07.1", "deploy a model to C++: export, AOTInductor, the C++ loader")
def check_deploy(deploy):
    model = _model()
    with tempfile.TemporaryDirectory() as tmp:
        x = _batch(5, seed=1)
        got = call_answer(deploy, model, x, Path(tmp))
        expect(
            isinstance(got, cpp.CppResult),
            "the C++ program's result (cpp.run_model)",
            type(got).__name__,
        )
        packages = sorted(Path(tmp).glob("*.pt2"))
        expect(
            len(packages) == 1,
            "one AOTInductor package (.pt2) in the folder given",
            [p.name for p in Path(tmp).iterdir()],
        )
        _toolchain()
        with torch.no_grad():
            _same(got.output, model(x), "the C++ output of batch 5")
            program = cpp.build_programs(["aoti_run"]).program("aoti_run")
            three = _batch(3, seed=2)
            try:  # the check runs the C++ program itself, on another batch size
                again = cpp.run_model(program, packages[0], three, Path(tmp))
            except cpp.CppProgramError as e:
                raise CheckFailed(
                    f"batch 3: expected your package to accept any batch size, got "
                    f"{str(e).splitlines()[0]} (export with a dynamic batch dimension)"
                ) from None
            _same(again.output, model(three), "the C++ output of batch 3")
    return "your package runs in C++ on batches of 5 and 3, with Python's outputs"


@exercise("07.2", "build your own C++ program against your package")
def check_own_program(build_predict):
    _toolchain()
    project = _project()
    program = call_answer(build_predict, project)
    expect(
        program is not None and Path(program).is_file(),
        "the path of your built program",
        f"no file at {program}",
    )
    course_build = cpp.build_root() / "cpp"
    expect(
        Path(program).parent != course_build,
        "your own program, built from your project",
        f"the course's {Path(program).name}",
    )
    x, package = _batch(4, seed=3), _package()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            got = cpp.run_model(program, package, x, Path(tmp))
        except (cpp.CppProgramError, FileNotFoundError, ValueError) as e:
            raise CheckFailed(
                f"expected {Path(program).name} PACKAGE INPUT OUTPUT to write OUTPUT, got "
                f"{str(e).splitlines()[0]}"
            ) from None
    with torch.no_grad():
        _same(got.output, export.load_package(package)(x), f"{Path(program).name} on batch 4")
    return f"{Path(program).name}, built by your function, reproduces Python on a new batch"


# (GPU capability, build's architectures, CUDA version that made the build, driver's CUDA
# version, what happens). A cubin (sm_XY) runs on the same major version with an equal or higher
# minor (arch-specific sm_XYa only on exactly X.Y); PTX (compute_XY) runs on X.Y or newer GPUs,
# but only if the driver supports the PTX's ISA version, that is, the CUDA that generated it.
DIAGNOSES = [
    ((8, 0), ["sm_80", "sm_90"], (12, 8), (12, 2), "runs"),
    ((8, 6), ["sm_80"], (12, 8), (12, 8), "runs"),
    ((9, 0), ["sm_80", "compute_80"], (12, 4), (12, 4), "runs"),
    ((9, 0), ["sm_80", "compute_80"], (12, 8), (12, 2), "update the driver"),
    ((10, 0), ["sm_90a", "compute_90"], (13, 0), (12, 8), "update the driver"),
    ((9, 0), ["sm_75", "sm_80", "sm_86"], (12, 4), (12, 4), "rebuild for the GPU"),
    ((7, 5), ["compute_80"], (12, 1), (12, 4), "rebuild for the GPU"),
    ((10, 0), ["sm_90a"], (12, 8), (12, 8), "rebuild for the GPU"),
    ((9, 0), ["sm_90a"], (12, 4), (12, 2), "runs"),
]


@exercise("07.3", "a kernel-image error: update the driver or rebuild?")
def check_diagnose(diagnose):
    for capability, archs, built_with, driver, want in DIAGNOSES:
        got = call_answer(diagnose, capability, list(archs), built_with, driver)
        what = (
            f"diagnose({capability}, {archs}, built with CUDA {built_with[0]}.{built_with[1]}, "
            f"driver for CUDA {driver[0]}.{driver[1]})"
        )
        expect(got == want, repr(want), repr(got), what)
    return f"all {len(DIAGNOSES)} GPU, build and driver combinations decided correctly"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------

VERDICTS = ("runs", "update the driver", "rebuild for the GPU")
GPUS = [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)]
ARCHS = [
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_89",
    "sm_90",
    "sm_90a",
    "sm_100",
    "sm_100a",
    "sm_120",
    "compute_75",
    "compute_80",
    "compute_90",
    "compute_100",
]


def _verdict(capability, archs, built_with, driver) -> str:
    """The rule 07.3 teaches, with `course doctor`'s: a cubin that fits runs whatever the driver
    (within one CUDA major version); else a PTX that fits needs a driver at least as new as
    the CUDA that made it; else nothing serves the GPU."""
    if arch_supported(capability, [a for a in archs if a.startswith("sm_")]):
        return "runs"
    if arch_supported(capability, [a for a in archs if a.startswith("compute_")]):
        return "runs" if tuple(driver) >= tuple(built_with) else "update the driver"
    return "rebuild for the GPU"


@held_out("07.3", cases=3)
def held_out_diagnoses(rng, diagnose):
    """Other GPUs, builds and drivers (CUDA 12.x), drawn until a verdict picked at random comes
    up, so each verdict is as likely: a table of the visible cases fails them."""
    want = rng.choice(VERDICTS)
    while True:
        capability = rng.choice(GPUS)
        archs = rng.sample(ARCHS, rng.randint(1, 4))
        built_with, driver = (12, rng.randint(0, 9)), (12, rng.randint(0, 9))
        if _verdict(capability, archs, built_with, driver) == want:
            break
    got = call_answer(diagnose, capability, list(archs), built_with, driver)
    expect(
        got == want,
        repr(want),
        repr(got),
        f"diagnose({capability}, {archs}, built with CUDA 12.{built_with[1]}, "
        f"driver for CUDA 12.{driver[1]})",
    )
