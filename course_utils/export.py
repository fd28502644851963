"""From a trained model to a file a C++ program loads: torch.export, AOTInductor, TorchScript.

Lesson 07. The current route: `export_model` (torch.export with a dynamic batch dimension) ->
`aoti_package` (AOTInductor compiles it into a self-contained .pt2) -> the C++ program
cpp/aoti_run.cpp loads it with `AOTIModelPackageLoader`. The legacy route, TorchScript
(`torchscript_trace`, `torchscript_script`, cpp/ts_run.cpp), is deprecated in favour of
torch.export; it stays here because clusters still run models saved that way.

The inductor cache and compiled packages are kept under build/, so a second run of the lesson is
fast. Building and running the C++ programs is `course_utils.cpp` (`cpp.build_programs`,
`cpp.run_model`, ...).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import shutil
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

import course_utils
from course_utils import ccache, processes
from course_utils.environment import patched_environ
from course_utils.paths import build_root

SAMPLE_SHAPE = (3, 32, 32)  # one CIFAR-10 image
SHAPE_KEY = "course.input_shape"  # metadata key the C++ loaders check inputs against
PROBE_TIMEOUT = 600  # seconds for a child to load a package (a cold load on a busy node)


# ---------------------------------------------------------------------------- places


@contextlib.contextmanager
def inductor_cache(path: str | os.PathLike | None = None):
    """Point TORCHINDUCTOR_CACHE_DIR at `path` (default build/inductor-cache), then restore it.
    Inside, Inductor's C++ compiles go through ccache where it is installed (course_utils.ccache):
    the wrapper of a package, 5 of its 10 s on 2 cores, is then compiled once per network."""
    from torch._inductor import config

    path = Path(path or build_root() / "inductor-cache")
    path.mkdir(parents=True, exist_ok=True)
    compiler = config.cpp.cxx[-1]
    cached = ccache.inductor_compiler(compiler) if isinstance(compiler, str) else None
    link, environment = cached or (compiler, {})
    with (
        patched_environ(TORCHINDUCTOR_CACHE_DIR=str(path.resolve()), **environment),
        config.patch({"cpp.cxx": (*config.cpp.cxx[:-1], link)}),
    ):
        yield path


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
    done = processes.run([sys.executable, "-c", _PROBE, path], timeout=PROBE_TIMEOUT)
    if done.ok:
        _PROBED[key] = None
        return
    if done.timed_out:
        how = f"did not finish ({done.describe()}, {PROBE_TIMEOUT} s)"
    elif done.returncode < 0:
        how = f"crashed ({done.describe()})"
    else:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        how = f"failed ({tail})"
    raise PackageLoadError(
        f"PyTorch {torch.__version__} {how} loading the AOTInductor package {path} in a test "
        f"process; this kernel was spared. The course is tested with PyTorch "
        f"{course_utils.TESTED_TORCH}, where the package loads. Run it with the C++ loader "
        "(cpp.build_programs and cpp.run_model) or install the tested PyTorch."
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
