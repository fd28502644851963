"""TF32 and fp32 precision: emulate TF32 rounding on any device, read and set the precision flags.

TF32 keeps float32's sign and 8 exponent bits but only 10 of its 23 mantissa bits; tensor cores
multiply TF32 inputs and accumulate in float32. `round_to_tf32` drops the 13 low mantissa bits
with round-to-nearest-even, so a float32 matmul of rounded inputs on the CPU shows the size of
the TF32 error without a GPU; `chained_matmul` sums in a GPU kernel's order, so the growth of
the float32 error with n can be seen too.

PyTorch has had three ways to set the flags: the legacy booleans
(`torch.backends.cuda.matmul.allow_tf32`, `torch.backends.cudnn.allow_tf32`),
`torch.set_float32_matmul_precision`, and, since 2.9, the `fp32_precision` attributes. The docs
say not to mix the legacy and the new API; once they are mixed, the legacy getters raise.
`fp32_precision(mode)` uses one API, restores every flag on exit, and names the route it took.
Taught in lesson 04.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.benchmark.utils.common import set_torch_threads

MODES = ("tf32", "ieee")
ENV_OVERRIDES = ("NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")
_DROPPED_BITS = 13  # float32 has 23 mantissa bits, TF32 keeps 10
_LOW_MASK = (1 << _DROPPED_BITS) - 1


def round_to_tf32(x: torch.Tensor) -> torch.Tensor:
    """`x` (float32) rounded to TF32's 10 mantissa bits, round to nearest, ties to even.

    Bit-exact: works on the integer pattern, so subnormals round like normal numbers, a carry
    into the exponent is correct, values past TF32's largest finite number become inf, and
    inf and nan come back unchanged. The result is float32 (the low 13 bits are zero).
    """
    if x.dtype != torch.float32:
        raise ValueError(
            f"round_to_tf32 expects a float32 tensor (TF32 rounds float32 inputs), got {x.dtype}; "
            "convert with x.float() first"
        )
    bits = x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF  # unsigned pattern
    lsb = (bits >> _DROPPED_BITS) & 1  # last kept bit: a tie rounds towards making it 0 (even)
    rounded = (bits + (_LOW_MASK >> 1) + lsb) & ~_LOW_MASK & 0xFFFFFFFF
    signed = torch.where(rounded >= 2**31, rounded - 2**32, rounded).to(torch.int32)
    out = signed.view(torch.float32).view(x.shape)
    # nan patterns near 0x7FFFFFFF would carry into the sign bit; a nan stays the input's nan.
    return torch.where(torch.isnan(x), x, out)


def relative_error(result: torch.Tensor, exact: torch.Tensor) -> float:
    """max|result - exact| / mean|exact|, the measure of PyTorch's CUDA notes, computed in fp64."""
    exact = exact.double()
    return float((result.double() - exact).abs().max() / exact.abs().mean())


def chained_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`a @ b` with every output summed in one chain along k: out += a[:, k] b[k, :], k = 0, 1, ...

    The summation order of a GPU matmul kernel, whose threads each accumulate their outputs in
    one loop over k (cuBLAS without split-K); CPU libraries sum in short blocks instead. The
    rounding error of a chain grows about as sqrt(k). Costs k rank-1 updates.
    """
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(
            f"chained_matmul multiplies matrices: got shapes {tuple(a.shape)} and "
            f"{tuple(b.shape)}; the first one's columns must match the second one's rows"
        )
    out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)
    with set_torch_threads(1):  # k small updates: on a busy machine, more threads mostly wait
        for k in range(a.shape[1]):
            out.addr_(a[:, k], b[k])
    return out


SUMMATIONS = ("library", "chain")


def matmul_error(n: int = 1024, mode: str = "ieee", seed: int = 0, summation: str = "library"):
    """Relative error of an n x n float32 matmul against float64, on the CPU.

    mode "ieee": plain float32; "tf32": inputs rounded with `round_to_tf32` (tensor-core style:
    TF32 products, float32 accumulation); "bf16": inputs rounded to bfloat16 (autocast's format).
    summation "library": the CPU's matmul (short blocks); "chain": `chained_matmul`, a GPU
    kernel's order (n^3 work in n steps: keep n <= 1024 or so).
    """
    if n < 1:
        raise ValueError(f"n={n} must be at least 1")
    if summation not in SUMMATIONS:
        raise ValueError(f"summation={summation!r} is not one of {SUMMATIONS}; pass one of those")
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(n, n, generator=gen, dtype=torch.float64)
    b = torch.randn(n, n, generator=gen, dtype=torch.float64)
    a32, b32 = rounded(a.float(), mode), rounded(b.float(), mode)
    result = a32 @ b32 if summation == "library" else chained_matmul(a32, b32)
    return relative_error(result, a @ b)


ROUNDINGS = ("ieee", "tf32", "bf16")


def rounded(x: torch.Tensor, mode: str) -> torch.Tensor:
    """float32 `x` as a matmul in `mode` reads it, still float32: "ieee" unchanged, "tf32"
    rounded to 10 mantissa bits (`round_to_tf32`), "bf16" rounded to bfloat16's 7."""
    if mode == "tf32":
        return round_to_tf32(x)
    if mode == "bf16":
        return x.bfloat16().float()
    if mode != "ieee":
        raise ValueError(f"mode={mode!r} is not one of {ROUNDINGS}; pass one of those")
    return x


@dataclass(frozen=True)
class PowerLaw:
    """y = scale * x ** exponent, fitted to measurements by `power_law_fit`."""

    scale: float
    exponent: float

    def __call__(self, x: float) -> float:
        return self.scale * x**self.exponent


def power_law_fit(xs, ys) -> PowerLaw:
    """The least-squares line through (log x, log y): how fast y grows with x."""
    if len(xs) != len(ys) or len(xs) < 2 or min(*xs, *ys) <= 0:
        raise ValueError(
            f"power_law_fit needs two or more positive (x, y) pairs; got {list(xs)} and {list(ys)}"
        )
    slope, intercept = statistics.linear_regression(
        [math.log(x) for x in xs], [math.log(y) for y in ys]
    )
    return PowerLaw(math.exp(intercept), slope)


def tf32_defaults(version: str) -> dict[str, bool] | None:
    """Whether PyTorch `version` lets float32 matmuls and cuDNN convolutions use TF32 by default.

    TF32 flags arrived in 1.7 with both on; 1.12 turned matmuls off (cuDNN stays on). None
    before 1.7, which had no TF32 flags.
    """
    try:
        major, minor = (int(part) for part in version.split("+")[0].split(".")[:2])
    except ValueError as e:
        raise ValueError(f"version={version!r} is not a PyTorch version such as '2.6.0'") from e
    if (major, minor) < (1, 7):
        return None
    return {"matmul": (major, minor) < (1, 12), "cudnn": True}


def cpu_bf16_support() -> str:
    """This CPU's bfloat16 hardware, as PyTorch detects it: AMX, AVX-512 BF16, or none."""
    cpu = getattr(torch, "cpu", None)
    found = [
        name
        for name, probe in (
            ("AMX", "_is_amx_tile_supported"),
            ("AVX-512 BF16", "_is_avx512_bf16_supported"),
        )
        if callable(getattr(cpu, probe, None)) and getattr(cpu, probe)()
    ]
    if found:
        return " and ".join(found)
    return "none detected: bfloat16 math runs in float32 units, plus conversions"


def saved_for_backward_bytes(model, inputs, targets, autocast_dtype=None) -> int:
    """Bytes autograd keeps for the backward pass of `model`'s cross-entropy loss on a batch:
    the tensors it saves (activations, and under autocast the weights' low-precision copies),
    each storage once, the parameters themselves not counted. With `autocast_dtype`, the
    forward pass runs under CPU autocast to that dtype. Taught in lesson 04."""
    storages: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    enabled = autocast_dtype is not None
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=autocast_dtype or torch.bfloat16, enabled=enabled):
            F.cross_entropy(model(inputs), targets)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in storages.items() if ptr not in params)


def _new_api() -> bool:
    return hasattr(torch.backends.cuda.matmul, "fp32_precision")


def _new_flags() -> dict[str, object]:
    """The objects carrying an `fp32_precision` attribute, parents before children."""
    b = torch.backends
    candidates = {
        "torch.backends": b,
        "torch.backends.cuda.matmul": b.cuda.matmul,
        "torch.backends.cudnn": b.cudnn,
        "torch.backends.cudnn.conv": getattr(b.cudnn, "conv", None),
        "torch.backends.cudnn.rnn": getattr(b.cudnn, "rnn", None),
        "torch.backends.mkldnn": b.mkldnn,
        "torch.backends.mkldnn.matmul": getattr(b.mkldnn, "matmul", None),
        "torch.backends.mkldnn.conv": getattr(b.mkldnn, "conv", None),
        "torch.backends.mkldnn.rnn": getattr(b.mkldnn, "rnn", None),
    }
    if not _new_api():
        return {}
    return {k: v for k, v in candidates.items() if v is not None and _has_fp32(v)}


@contextlib.contextmanager
def _quiet_legacy():
    """Hide the deprecation warning some PyTorch versions (2.9-2.11) raise on legacy TF32 calls.

    Only around the reads and writes this module makes on its own behalf.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*new API settings to control TF32.*")
        yield


def _has_fp32(obj) -> bool:
    try:
        obj.fp32_precision  # noqa: B018 (reading it is the test)
    except (AttributeError, RuntimeError):
        return False
    return True


def _legacy_getters() -> dict[str, Callable[[], object]]:
    return {
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision,
        "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
    }


def precision_state() -> dict[str, object]:
    """Every fp32 precision flag as PyTorch reports it now, plus the environment overrides.

    A legacy getter that raises (PyTorch's answer to mixed legacy and new settings) is reported
    as the string "error: mixed legacy and new API" instead of a value.
    """
    state: dict[str, object] = {}
    for name, get in _legacy_getters().items():
        try:
            with _quiet_legacy():
                state[name] = get()
        except RuntimeError:
            state[name] = "error: mixed legacy and new API"
    for name, obj in _new_flags().items():
        state[f"{name}.fp32_precision"] = obj.fp32_precision
    for var in ENV_OVERRIDES:
        state[f"env {var}"] = os.environ.get(var, "unset")
    return state


def print_precision_state() -> None:
    """Print `precision_state()`, one flag per line: read the effective state, never assume it."""
    state = precision_state()
    width = max(map(len, state))
    for name, value in state.items():
        print(f"{name:<{width}}  {value}")


def _snapshot() -> tuple[dict[str, str], str | None, bool | None]:
    new = {name: obj.fp32_precision for name, obj in _new_flags().items()}
    try:
        with _quiet_legacy():
            matmul = torch.get_float32_matmul_precision()
            cudnn = torch.backends.cudnn.allow_tf32
    except RuntimeError:  # mixed state: the legacy values cannot be read (nor need restoring)
        matmul, cudnn = None, None
    return new, matmul, cudnn


def _restore(snapshot, legacy: bool) -> None:
    """Put back the flags of `snapshot`; the legacy values only if the legacy route changed them."""
    new, matmul, cudnn = snapshot
    # Legacy setters also write the new fields, so they go first and the new fields last.
    if legacy:
        with _quiet_legacy():
            torch.set_float32_matmul_precision(matmul)
            torch.backends.cudnn.allow_tf32 = cudnn
    flags = _new_flags()
    for name, value in new.items():
        flags[name].fp32_precision = value


def _set_new(mode: str) -> None:
    b = torch.backends
    b.cuda.matmul.fp32_precision = mode
    b.cudnn.conv.fp32_precision = mode
    b.cudnn.rnn.fp32_precision = mode


def _set_legacy(mode: str) -> None:
    torch.set_float32_matmul_precision("high" if mode == "tf32" else "highest")
    torch.backends.cudnn.allow_tf32 = mode == "tf32"  # the user chose this route: warnings show


@contextlib.contextmanager
def fp32_precision(mode: str, api: str = "auto"):
    """Within the block, float32 matmul and cuDNN conv/RNN use `mode` ("tf32" or "ieee").

    `api`: "new" (the `fp32_precision` attributes, PyTorch >= 2.9), "legacy"
    (`set_float32_matmul_precision` and `cudnn.allow_tf32`), or "auto" (new when the installed
    PyTorch has it). Yields the route taken, "new" or "legacy". On exit, even after an exception,
    every flag is back to what it was. With the new API the legacy getters raise inside the
    block (mixed settings); code there that reads them (some torch.compile paths) fails.
    """
    if mode not in MODES:
        raise ValueError(
            f"mode={mode!r} is not one of {MODES}; use 'tf32' (fast) or 'ieee' (exact fp32)"
        )
    if api == "auto":
        api = "new" if _new_api() else "legacy"
    if api not in ("new", "legacy"):
        raise ValueError(f"api={api!r} is not one of 'auto', 'new', 'legacy'")
    if api == "new" and not _new_api():
        raise ValueError(
            "api='new' needs PyTorch >= 2.9 (the fp32_precision attributes); this is "
            f"{torch.__version__}; use api='legacy' or 'auto'"
        )
    snapshot = _snapshot()
    if api == "legacy" and snapshot[1] is None:
        raise ValueError(
            "the current flags mix the legacy and the new API, so the legacy route cannot save "
            "them; use api='new', or reset the flags with one API first"
        )
    try:
        (_set_new if api == "new" else _set_legacy)(mode)
        yield api
    finally:
        _restore(snapshot, legacy=api == "legacy")
