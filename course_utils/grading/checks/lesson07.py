"""Checkers of lesson 07, deploying to C++.

07.1 and 07.2 are the learner's runs: builds and C++ programs. The judge runs none of them, and
none of the learner's code: probes in the learner's process do. 07.1's probe hands `deploy` a
model made from the judge's seed and a batch drawn from it, reads what the C++ program wrote in
the folder, and runs the course's loader on the package left there with a second batch of
another size. 07.2's probe lets `build_predict` build its program in the lesson's project
(runs/07/example, made as the lesson makes it where it is missing), then runs that program on
a package of the judge's model and a batch from the judge's seed. Each probe returns the
outputs as plain tensors; the judge makes the same model and the same batches itself and
compares them with its own eager outputs. The probes need cmake and a C++ compiler, and say so
where one is missing. 07.3 is a decision on plain data, with held-out cases: other GPUs,
builds and drivers.
"""

from pathlib import Path

import torch

from course_utils import cpp
from course_utils.doctor.gpu import build_verdict
from course_utils.grading import (
    CheckFailed,
    call_answer,
    exercise,
    expect,
    held_out,
    run_probe,
)
from course_utils.grading.probes.lesson07 import (
    DEPLOY_BATCHES,
    PREDICT_BATCH,
    _batch,
    _model,
    run_build_predict,
    run_deploy,
)

TOLERANCE = 1e-5  # C++ against Python's eager outputs, float32 on the CPU


def _eager(seed: int, x: torch.Tensor) -> torch.Tensor:
    """The judge's own output of the model made from `seed` on `x`."""
    with torch.no_grad():
        return _model(seed)(x)


def _same(got, want: torch.Tensor, what: str) -> None:
    expect(type(got) is torch.Tensor, "a tensor of outputs", type(got).__name__, what)
    expect(
        tuple(got.shape) == tuple(want.shape),
        f"an output of shape {tuple(want.shape)}",
        tuple(got.shape),
        what,
    )
    diff = (got - want).abs().max().item()
    expect(
        diff <= TOLERANCE,
        f"outputs within {TOLERANCE:g} of Python's",
        f"a difference of {diff:.2g}",
        what,
    )


# ---- 07.1 ---------------------------------------------------------------------------------


@exercise(
    "07.1",
    "deploy a model to C++: export, AOTInductor, the C++ loader",
    allows=("starts processes", "opens or removes files"),
    reference=(r"cpp_demo",),
)
def check_deploy(deploy, seed: int = 0):
    first, second = DEPLOY_BATCHES
    got = run_probe(run_deploy, deploy, seed=seed)
    expect(
        got["kind"] == "CppResult",
        "the C++ program's result (cpp.run_model)",
        got["kind"],
    )
    expect(
        got["packages"] == 1,
        "one AOTInductor package (.pt2) in the folder given",
        got["files"],
    )
    want = _eager(seed, _batch(first, seed + 1))
    _same(got["returned"], want, f"the C++ output of batch {first}")
    expect(
        got["written"] is not None,
        "the output file the C++ program wrote in the folder (output.tensor, cpp.run_model)",
        f"no such file among {got['files']}",
    )
    _same(got["written"], want, f"the file the C++ program wrote for batch {first}")
    if got.get("again_error"):
        raise CheckFailed(
            f"batch {second}: expected your package to accept any batch size, got "
            f"{got['again_error']} (export with a dynamic batch dimension)"
        )
    _same(got["again"], _eager(seed, _batch(second, seed + 2)), f"the C++ output of batch {second}")
    return f"your package runs in C++ on batches of {first} and {second}, with Python's outputs"


def prepare_runs() -> str:
    """Run by `course grade` on its own machine before lesson 07's sandboxed runs: the course's
    programs built once (incrementally), which each run is shown read-only (cpp.PREBUILT_VARIABLE)
    instead of building them cold: about a minute of each learner's grading on 2 cores. What it
    did, in one line; where nothing can be built, each run builds its own as before."""
    missing = cpp.toolchain_missing()
    if missing:
        return f"lesson 07: the course's C++ programs are not built beforehand ({missing})"
    try:
        build = cpp.build_programs(folder=cpp.programs_dir())  # never the prebuilt ones
    except cpp.CppProgramError as e:
        first = str(e).splitlines()[0]
        return f"lesson 07: building the course's C++ programs beforehand failed ({first})"
    return f"lesson 07: {build}, shown read-only to each run"


# ---- 07.2 ---------------------------------------------------------------------------------


@exercise(
    "07.2",
    "build your own C++ program against your package",
    allows=("starts processes", "opens or removes files"),
    reference=(r"aoti_run",),
)
def check_own_program(build_predict, seed: int = 3):
    got = run_probe(run_build_predict, build_predict, seed=seed)
    program = got["program"]
    expect(
        "course_program" in got,
        "the path of your built program",
        f"no file at {program}" if program else got["kind"],
    )
    name = Path(program).name
    expect(
        not got["course_program"],
        "your own program, built from your project",
        f"the course's {name}",
    )
    if got.get("error"):
        raise CheckFailed(
            f"expected {name} PACKAGE INPUT OUTPUT to write OUTPUT, got {got['error']}"
        )
    _same(got["output"], _eager(0, _batch(PREDICT_BATCH, seed)), f"{name} on batch 4")
    return f"{name}, built by your function, reproduces Python on a new batch"


# ---- 07.3 ---------------------------------------------------------------------------------

# (GPU capability, build's architectures, CUDA version that made the build, driver's CUDA
# version, what happens), by the course's one build rule (doctor.gpu.build_verdict).
DIAGNOSES = [
    ((8, 0), ["sm_80", "sm_90"], (12, 8), (12, 2), "runs"),
    ((8, 6), ["sm_80"], (12, 8), (12, 8), "runs"),
    ((9, 0), ["sm_80", "compute_80"], (12, 4), (12, 4), "runs"),
    ((9, 0), ["sm_80", "compute_80"], (12, 8), (12, 2), "update the driver"),
    ((10, 0), ["sm_90a", "compute_90"], (13, 0), (12, 8), "update the driver"),
    ((9, 0), ["sm_90"], (13, 0), (12, 8), "update the driver"),
    ((9, 0), ["sm_75", "sm_80", "sm_86"], (12, 4), (12, 4), "rebuild for the GPU"),
    ((7, 5), ["compute_80"], (12, 1), (12, 4), "rebuild for the GPU"),
    ((10, 0), ["sm_90a"], (12, 8), (12, 8), "rebuild for the GPU"),
    ((9, 0), ["sm_90a"], (12, 4), (12, 2), "runs"),
    ((12, 0), ["sm_120"], (12, 8), (13, 0), "runs"),
]


def _verdict(capability, archs, built_with, driver) -> str:
    """The rule 07.3 teaches: the course's one build rule (`doctor.gpu.build_verdict`, which
    lesson 00 teaches too)."""
    return build_verdict(capability, archs, built_with, driver)


def _cuda(version) -> str:
    return f"{version[0]}.{version[1]}"


def _diagnosis(diagnose, capability, archs, built_with, driver, want) -> None:
    got = call_answer(diagnose, capability, list(archs), built_with, driver)
    what = (
        f"diagnose({capability}, {archs}, built with CUDA {_cuda(built_with)}, "
        f"driver for CUDA {_cuda(driver)})"
    )
    expect(type(got) is str and got == want, repr(want), repr(got), what)


@exercise(
    "07.3",
    "a kernel-image error: update the driver or rebuild?",
    reference=(r"arch_supported", r"build_verdict", r"gpu_finding", r"\bdoctor\b"),
)
def check_diagnose(diagnose):
    for capability, archs, built_with, driver, want in DIAGNOSES:
        _diagnosis(diagnose, capability, archs, built_with, driver, want)
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


@held_out("07.3", cases=3)
def held_out_diagnoses(rng, diagnose):
    """Other GPUs, builds and drivers (CUDA 12.x and 13.x), drawn until a verdict picked at
    random comes up, so each verdict is as likely: a table of the visible cases fails them."""
    want = rng.choice(VERDICTS)
    while True:
        capability = rng.choice(GPUS)
        archs = rng.sample(ARCHS, rng.randint(1, 4))
        built_with = (rng.choice([12, 12, 13]), rng.randint(0, 9))
        driver = (rng.choice([12, 13]), rng.randint(0, 9))
        if _verdict(capability, archs, built_with, driver) == want:
            break
    _diagnosis(diagnose, capability, archs, built_with, driver, want)
