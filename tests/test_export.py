"""course_utils.export in this process: torch.export, the inductor cache, TorchScript, and the
names lesson 07 reaches through export.* (course_utils.cpp's, tested in tests/test_cpp.py).

The C++ programs themselves are built and run in tests/integration/test_export_cpp.py."""

from __future__ import annotations

import os
import warnings

import pytest
import torch

from course_utils import export as ex
from course_utils.models import Net


def _net(seed: int = 0) -> Net:
    torch.manual_seed(seed)
    return Net().eval()


def test_export_dynamic_batch_runs_at_two_sizes():
    model = _net()
    exported = ex.export_model(model, torch.randn(2, 3, 32, 32))
    assert ex.input_shape_spec(exported) == "-1,3,32,32"
    for batch in (1, 7):
        x = torch.randn(batch, 3, 32, 32)
        torch.testing.assert_close(exported.module()(x), model(x))


def test_export_static_shape_spec():
    exported = ex.export_model(_net(), torch.randn(2, 3, 32, 32), dynamic_batch=False)
    assert ex.input_shape_spec(exported) == "2,3,32,32"


def test_export_rejects_batch_of_one_for_dynamic_batch():
    with pytest.raises(ValueError, match="batch of 2 or more"):
        ex.export_model(_net(), torch.randn(1, 3, 32, 32))


def test_inductor_cache_sets_and_restores(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/else")
    with ex.inductor_cache(tmp_path / "cache") as folder:
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder.resolve())
        assert folder.is_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/somewhere/else"


def test_inductor_compiles_through_ccache_inside_the_cache_block(tmp_path, monkeypatch):
    from torch._inductor import config

    before = config.cpp.cxx
    through = (str(tmp_path / "bin" / "g++"), {"CCACHE_DIR": str(tmp_path)})
    monkeypatch.setattr(ex.ccache, "inductor_compiler", lambda compiler: through)
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    with ex.inductor_cache(tmp_path / "cache"):
        assert config.cpp.cxx[-1] == through[0] and os.environ["CCACHE_DIR"] == str(tmp_path)
    assert config.cpp.cxx == before and "CCACHE_DIR" not in os.environ
    monkeypatch.setattr(ex.ccache, "inductor_compiler", lambda compiler: None)  # no ccache
    with ex.inductor_cache(tmp_path / "cache"):
        assert config.cpp.cxx == before


def test_torchscript_warnings_are_shown_once_each_in_short_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ex, "_NOTED", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning escaping the helper fails the test
        ex.torchscript_script(_net(), tmp_path / "s.pt")
        first = capsys.readouterr().out.splitlines()
        ex.torchscript_script(_net(), tmp_path / "s2.pt")
        second = capsys.readouterr().out.splitlines()
        ex.torchscript_load(tmp_path / "s.pt")
        third = capsys.readouterr().out.splitlines()
    assert len(first) == 1 and first[0].startswith("note: deprecated, use torch.export: ")
    assert "torch.jit.script" in first[0] and "torch.jit.save" in first[0]
    assert second == []  # nothing new: nothing printed
    assert third == ["note: deprecated, use torch.export: torch.jit.load"]


@pytest.mark.parametrize(
    "warned, note",
    [
        ([], "torch.jit.script, torch.jit.save"),  # PyTorch 2.6: TorchScript does not warn
        (["torch.jit.script", "torch.jit.save"], "torch.jit.script, torch.jit.save"),  # 2.14
        (["torch.jit.script"], "torch.jit.script"),  # what it says wins over what it calls
    ],
)
def test_torchscript_notes_name_the_calls_whether_or_not_pytorch_warns(
    warned, note, capsys, monkeypatch
):
    monkeypatch.setattr(ex, "_NOTED", set())
    with ex._torchscript_notes("torch.jit.script", "torch.jit.save"):
        for api in warned:
            message = f"`{api}` is deprecated. Please switch to `torch.export`."
            warnings.warn(message, FutureWarning, stacklevel=1)
    assert capsys.readouterr().out.splitlines() == [f"note: deprecated, use torch.export: {note}"]
