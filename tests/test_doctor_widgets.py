"""`course doctor` says when the kernel's ipywidgets and the server's widget extension differ."""

import json
import sys
from pathlib import Path

import pytest

from course_utils.doctor import findings, jupyter


def _extension(folder: Path, version: str) -> Path:
    package = folder / "@jupyter-widgets" / "jupyterlab-manager" / "package.json"
    package.parent.mkdir(parents=True)
    package.write_text(
        json.dumps({"name": "@jupyter-widgets/jupyterlab-manager", "version": version})
    )
    return folder


@pytest.mark.parametrize(
    "ipywidgets_v, extension_v, ok",
    [
        ("8.1.9", "5.0.16", True),
        ("7.8.5", "3.6.8", True),
        ("8.1.9", "3.6.8", False),  # jupyterlab_widgets 1.x: ipywidgets 8 controls don't render
        ("7.8.5", "5.0.16", False),
        ("8.1.9", "6.0.0", False),
    ],
)
def test_widgets_pair(ipywidgets_v, extension_v, ok):
    assert jupyter.widgets_pair(ipywidgets_v, extension_v) is ok


def test_extension_version_first_found_wins(tmp_path):
    first = _extension(tmp_path / "a", "5.0.16")
    second = _extension(tmp_path / "b", "3.6.8")
    assert jupyter.widget_extension_version([tmp_path / "none", first, second]) == "5.0.16"
    assert jupyter.widget_extension_version([tmp_path / "none"]) is None


@pytest.mark.parametrize(
    "cmdline, prefix",
    [
        (
            ["/opt/centre/bin/python3", "/opt/centre/bin/jupyterhub-singleuser", "--port=1"],
            "/opt/centre",
        ),
        (["/srv/venv/bin/python", "/srv/venv/bin/jupyter-lab", "--no-browser"], "/srv/venv"),
        (["/usr/bin/python3", "-m", "pytest", "tests"], None),  # not a Jupyter server
        ([], None),
    ],
)
def test_server_prefix_from_parent_command_line(cmdline, prefix):
    found = jupyter.server_prefix(cmdline)
    assert (str(found) if found else None) == prefix


def _with_server(monkeypatch, tmp_path, version):
    """Pretend a server in tmp_path/centre started this kernel, with an extension `version`."""
    centre = tmp_path / "centre"
    dirs = centre / "share" / "jupyter" / "labextensions"
    dirs.mkdir(parents=True)
    if version:
        _extension(dirs, version)
    monkeypatch.setattr(
        jupyter,
        "_parent_cmdline",
        lambda: [str(centre / "bin" / "python3"), str(centre / "bin" / "jupyterhub-singleuser")],
    )
    monkeypatch.setenv("JUPYTER_PATH", "")
    monkeypatch.setenv("JUPYTER_NO_CONFIG", "1")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user-level extensions


def test_server_without_extension_warns_with_the_fix(monkeypatch, tmp_path):
    _with_server(monkeypatch, tmp_path, None)
    dirs, where = jupyter.server_labextension_dirs()
    assert str(tmp_path / "centre") in where
    assert Path(sys.prefix) / "share" / "jupyter" / "labextensions" not in dirs  # kernel's own
    (finding,) = jupyter.widgets()
    assert finding.status == findings.WARN
    assert "no widget extension (controls show as text)" in finding.value
    assert "pip install jupyterlab_widgets==3.0.*" in finding.advice
    assert "centre's" in finding.advice


def test_server_with_old_extension_warns(monkeypatch, tmp_path):
    _with_server(monkeypatch, tmp_path, "3.6.8")
    (finding,) = jupyter.widgets()
    assert finding.status == findings.WARN
    assert finding.value.endswith("jupyterlab-manager 3.6.8 does not render this ipywidgets")


def test_server_with_matching_extension_is_ok(monkeypatch, tmp_path):
    _with_server(monkeypatch, tmp_path, "5.0.16")
    (finding,) = jupyter.widgets()
    assert finding.status == findings.OK, finding
    assert "jupyterlab-manager 5.0.16" in finding.value


def test_without_a_server_reads_this_environment(monkeypatch):
    monkeypatch.setattr(jupyter, "_parent_cmdline", lambda: ["/bin/bash"])
    dirs, where = jupyter.server_labextension_dirs()
    assert where == "this environment's server"
    assert Path(sys.prefix) / "share" / "jupyter" / "labextensions" in dirs
    (finding,) = jupyter.widgets()
    assert "this environment's server" in finding.value
