"""course_utils.lightning_helpers: how the installed Lightning saves, read from its source."""

import builtins

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
