"""`make lab` starts JupyterLab on 127.0.0.1 with a token, and it answers; then we stop it."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from course_utils.paths import REPO_ROOT  # noqa: E402

ROOT = REPO_ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str | None = None):
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"token {token}")
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, response.read().decode()


@pytest.mark.slow
def test_make_lab_serves_and_stops(tmp_path):
    port, token = _free_port(), "course-test-token"
    log = tmp_path / "lab.log"
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"PORT={port}", f"TOKEN={token}"],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # so the whole group (make, jupyter) can be stopped
    )
    try:
        # make may first bring .venv up to date with the pins; then it prints the URL.
        deadline, status = time.monotonic() + 300, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = _get(f"http://127.0.0.1:{port}/api/status", token)
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        assert status is not None, f"no answer on port {port}:\n{log.read_text()[-3000:]}"
        assert f"Open http://127.0.0.1:{port}/lab?token={token}" in log.read_text()
        assert status[0] == 200 and "started" in json.loads(status[1])
        with pytest.raises(urllib.error.HTTPError) as denied:
            _get(f"http://127.0.0.1:{port}/api/contents")  # no token: refused
        assert denied.value.code == 403
        code, body = _get(f"http://127.0.0.1:{port}/api/contents", token)
        names = {item["name"] for item in json.loads(body)["content"]}
        assert "01_tensors.ipynb" in names  # served from notebooks/
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
