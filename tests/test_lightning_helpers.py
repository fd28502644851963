"""course_utils.lightning_helpers: how the installed Lightning saves, read from its source."""

import builtins
import os

import pytest

from course_utils import lightning_helpers


def test_the_save_route_is_read_from_the_installed_source():
    pytest.importorskip("lightning")
    route = lightning_helpers.atomic_save_route()
    assert route["_atomic_save writes through fsspec in a transaction"] is True
    assert route["fsspec's temporary file from tempfile.mkstemp()"] is True
    assert isinstance(route["os.fsync anywhere on the way"], bool)


def test_without_lightning_the_route_says_so(monkeypatch):
    real_import = builtins.__import__

    def no_lightning(name, *args, **kwargs):
        if name.startswith("lightning"):
            raise ImportError("No module named 'lightning'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_lightning)
    route = lightning_helpers.atomic_save_route()
    assert route == {
        "lightning": "not installed here (No module named 'lightning'); "
        "pip install -r requirements.txt"
    }


def test_fit_without_ckpt_path_loads_an_hpc_checkpoint_only_inside_a_slurm_job(
    tmp_path, monkeypatch
):
    """Lesson 06's claim, on the installed Lightning: `ckpt_path=None` becomes "hpc" (the newest
    hpc_ckpt_<N>.ckpt of default_root_dir, where auto-requeue saves) inside a Slurm job, that is
    SLURM_NTASKS set and a job name other than bash or interactive; elsewhere it loads nothing."""
    pytest.importorskip("lightning")
    import lightning as L
    from lightning.pytorch.trainer.states import TrainerFn

    for name in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(name)
    for n in (1, 3):
        (tmp_path / f"hpc_ckpt_{n}.ckpt").write_bytes(b"")
    quiet = dict(logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer = L.Trainer(default_root_dir=tmp_path, accelerator="cpu", devices=1, **quiet)

    def parsed():
        connector = trainer._checkpoint_connector
        return connector._parse_ckpt_path(
            TrainerFn.FITTING, None, model_provided=True, model_connected=False
        )

    assert parsed() is None
    monkeypatch.setenv("SLURM_NTASKS", "1")
    monkeypatch.setenv("SLURM_JOB_NAME", "train")
    assert parsed() == str(tmp_path / "hpc_ckpt_3.ckpt")
    monkeypatch.setenv("SLURM_JOB_NAME", "interactive")
    assert parsed() is None
