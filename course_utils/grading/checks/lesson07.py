"""Checkers of lesson 07, deploying to C++."""

import torch

from course_utils.doctor_gpu import arch_supported  # the rule course doctor applies
from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out
from course_utils.models import Net


@exercise("07.1", "export a model with a dynamic batch dimension")
def check_export_dynamic(export_with_dynamic_batch):
    torch.manual_seed(0)
    model = Net().eval()
    got = call_answer(export_with_dynamic_batch, model, torch.randn(4, 3, 32, 32))
    expect(
        isinstance(got, torch.export.ExportedProgram),
        "a torch.export.ExportedProgram",
        type(got).__name__,
    )
    for batch in (3, 9):
        x = torch.randn(batch, 3, 32, 32)
        try:
            out = got.module()(x)
        except Exception as e:  # a static export rejects other batch sizes with a guard error
            first = (str(e).splitlines() or [type(e).__name__])[0]
            raise CheckFailed(
                f"batch {batch}: expected the program to accept any batch size, "
                f"got {type(e).__name__}: {first} (pass dynamic_shapes with a "
                "torch.export.Dim for dimension 0)"
            ) from None
        with torch.no_grad():
            expect(
                torch.allclose(out, model(x), atol=1e-5),
                "the model's outputs",
                "different values",
                f"batch {batch}",
            )
    return "one exported program serves batches of 3 and 9, with the model's outputs"


@exercise("07.2", "a data-dependent branch that torch.export can keep")
def check_cond(gated):
    class Gate(torch.nn.Module):
        def forward(self, x):
            return gated(x)

    pos, neg = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([-1.0, -2.0, 0.5, 0.25])
    for x in (pos, neg):  # eager first: a stub raises NotImplementedError here
        call_answer(gated, x.clone())
    try:
        program = torch.export.export(Gate(), (pos,))
    except Exception as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise CheckFailed(
            f"expected torch.export to capture gated, got {type(e).__name__}: "
            f"{first} (use torch.cond instead of a Python if)"
        ) from None
    for x, want, name in ((pos, pos * 2, "sum > 0"), (neg, neg - 1, "sum <= 0")):
        got = program.module()(x.clone())
        expect(
            torch.allclose(got, want),
            want.tolist(),
            got.tolist(),
            f"exported program, branch {name}",
        )
    return "the exported program keeps both branches (torch.cond)"


# (capability, arch list, kernels available?) covering exact cubins, same-major newer GPUs,
# arch-specific 'a' cubins, PTX JIT, and GPUs newer than everything in the build.
ARCH_CASES = [
    ((8, 0), ["sm_80", "sm_90"], True),
    ((8, 6), ["sm_80"], True),
    ((8, 0), ["sm_86"], False),
    ((9, 0), ["sm_75", "sm_80", "sm_86"], False),
    ((9, 0), ["sm_80", "compute_80"], True),
    ((7, 5), ["compute_80"], False),
    ((12, 0), ["sm_90", "sm_100"], False),
    ((9, 0), ["sm_90a"], True),
    ((10, 0), ["sm_90a"], False),
    ((6, 0), ["sm_75", "sm_80"], False),
]


@exercise("07.3", "will this build run on that GPU?")
def check_kernels_available(kernels_available):
    for capability, arch_list, want in ARCH_CASES:
        got = call_answer(kernels_available, capability, list(arch_list))
        expect(
            got is want or got == want, want, got, f"kernels_available({capability}, {arch_list})"
        )
    return f"all {len(ARCH_CASES)} GPU/build combinations decided correctly"


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("07.3", cases=4)
def held_out_kernels_available(rng, kernels_available):
    """Other GPUs and builds: a table of the ten visible answers fails them."""
    capability = rng.choice([(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)])
    archs = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_90a", "sm_100", "compute_80",
             "compute_90"]  # fmt: skip
    arch_list = sorted(rng.sample(archs, rng.randint(1, 4)), key=archs.index)
    got = call_answer(kernels_available, capability, list(arch_list))
    want = arch_supported(capability, arch_list)
    expect(got is want or got == want, want, got, f"kernels_available({capability}, {arch_list})")
