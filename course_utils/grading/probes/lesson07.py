"""Lesson 07's probes: the learner's builds and C++ programs, run in the learner's process.

07.1's probe hands `deploy` a model made from the judge's seed and a batch drawn from it, reads
what the C++ program wrote in the folder, and runs the course's loader on the package left there
with a second batch of another size. 07.2's probe lets `build_predict` build its program in the
lesson's project (runs/07/example), then runs that program on a package of the model at seed 0 and a
batch from the judge's seed. Each returns the outputs as plain tensors; the judge computes the
same model's eager outputs itself (checks/lesson07.py). They need cmake and a C++ compiler, and
say so where one is missing.
"""

import tempfile
from pathlib import Path

import torch

from course_utils import cpp, export
from course_utils.grading import CheckFailed, probe
from course_utils.models import Net
from course_utils.paths import build_root

# batch sizes: the one handed to deploy, and the one the course's loader runs on its package
DEPLOY_BATCHES = (5, 3)
PREDICT_BATCH = 4


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


def _model(seed: int = 0) -> Net:
    """The CNN with weights drawn from `seed` (the global generator left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Net().eval()


def _tensor(value):
    """A plain CPU tensor from the learner's side, or None for anything else."""
    return value.detach().cpu() if type(value) is torch.Tensor else None


@probe("07.1")
def run_deploy(deploy, seed: int):
    """In the learner's process: their deploy on the judge's model and batch; what the C++
    program wrote; the course's loader on the package they left, with another batch size."""
    first, second = DEPLOY_BATCHES
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        got = deploy(_model(seed), _batch(first, seed + 1), folder)
        report = {"kind": type(got).__name__, "returned": None, "written": None, "again": None}
        if type(got) is cpp.CppResult:
            report["returned"] = _tensor(got.output)
        written = folder / "output.tensor"
        if written.is_file():
            report["written"] = cpp.read_tensor(written)
        packages = sorted(folder.glob("*.pt2"))
        report["files"] = sorted(p.name for p in folder.iterdir())
        report["packages"] = len(packages)
        if len(packages) == 1:
            _toolchain()
            program = cpp.build_programs(["aoti_run"]).program("aoti_run")
            again = folder / "again"
            again.mkdir()
            batch = _batch(second, seed + 2)
            report |= _run_model(program, packages[0], batch, again, "again", "again_error")
    return report


def _run_model(program, package, batch, folder, key: str, error_key: str) -> dict:
    """{key: the program's output on `batch`} or {error_key: the first line of why not}."""
    try:
        return {key: cpp.run_model(program, package, batch, folder).output}
    except (cpp.CppProgramError, FileNotFoundError, ValueError) as e:
        return {error_key: _first_line(e)}


def _package() -> Path:
    """The judge's model (seed 0) as a package: compiled once, then reused from
    build/aoti-packages."""
    exported = export.export_model(_model(), _batch(2, seed=0))
    return export.aoti_package(exported, build_root() / "exercise-07" / "net.pt2").path


def _project() -> Path:
    """The learner's project where and as the lesson makes it (runs/07/example: the
    documentation's example plus include(CourseTorch), keeping what 07.2 added). The check
    builds in it, so the lesson's own build of `predict` after the check finds it built (a
    second folder compiled it again)."""
    return cpp.documentation_example(cpp.LESSON_EXAMPLE).resolve()


@probe("07.2")
def run_build_predict(build_predict, seed: int):
    """In the learner's process: their build in the lesson's project, then their
    program on a package of the judge's model and a batch from the judge's seed."""
    _toolchain()
    program = build_predict(_project())
    report = {"kind": type(program).__name__, "program": None, "output": None}
    if not isinstance(program, (str, Path)) or not Path(program).is_file():
        report["program"] = str(program) if isinstance(program, (str, Path)) else None
        return report
    program = Path(program)
    report["program"] = str(program)
    report["course_program"] = cpp.is_course_program(program)
    with tempfile.TemporaryDirectory() as tmp:
        batch = _batch(PREDICT_BATCH, seed)
        return report | _run_model(program, _package(), batch, Path(tmp), "output", "error")


def _first_line(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:300]
