"""Helpers for tests/test_browser.py: find the tools, start and stop servers, drive JupyterLab.

The tools come from `.ci/browser-setup.sh` (Debian's chromium, Playwright in .venv, a "centre" venv
with JupyterHub under COURSE_BROWSER_HOME, configurable-http-proxy from npm). Where one is missing
the tests are skipped with the reason (tests/needs.py); under CI (env CI=true) they fail instead.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from course_utils.paths import REPO_ROOT

ROOT = REPO_ROOT
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")
BROWSER_HOME = Path(
    os.environ.get("COURSE_BROWSER_HOME")
    or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "course-browser"
)
CENTRE = BROWSER_HOME / "centre"
PROXY = BROWSER_HOME / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
# As measured with Debian 12's chromium: without the networking switches Chromium keeps trying
# Google's hosts, which this closed network refuses.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
KERNEL_DISPLAY = "PyTorch on HPC (course)"
SETUP_HINT = "run .ci/browser-setup.sh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(
    url: str, proc: subprocess.Popen, log: Path, timeout: float, statuses: tuple[int, ...] = ()
) -> None:
    """Poll `url` until it answers with one of `statuses` (empty: any HTTP status counts); fail
    with the log if it never does. JupyterHub's proxy answers 404 until the hub has added its
    route, so the hub waits for 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            status = urllib.request.urlopen(url, timeout=5).status
        except urllib.error.HTTPError as e:
            status = e.code
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            status = None
        if status is not None and (not statuses or status in statuses):
            return
        time.sleep(0.3)
    pytest.fail(f"no answer from {url} (exit code {proc.poll()}):\n{log.read_text()[-3000:]}")


def start(cmd: list[str], log: Path, **kwargs) -> subprocess.Popen:
    """Start `cmd` in its own session so that stop() can end its whole process group."""
    return subprocess.Popen(
        cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True, **kwargs
    )


def stop(proc: subprocess.Popen, leftovers_under: Path | None = None) -> None:
    """SIGTERM the process group, SIGKILL after 20 s; then any process still running from
    `leftovers_under` (servers a hub spawned in their own sessions)."""
    with _suppress_gone():
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with _suppress_gone():
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if leftovers_under is not None:
        for pid in _pids_using(leftovers_under):
            with _suppress_gone():
                os.killpg(pid, signal.SIGKILL)


class _suppress_gone:
    def __enter__(self):
        return self

    def __exit__(self, kind, *_):
        return kind is not None and issubclass(kind, ProcessLookupError)


def _pids_using(folder: Path) -> list[int]:
    """Processes whose working directory or command line lies in `folder` (a test's tmp dir)."""
    found, marker = [], str(folder)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if cwd.startswith(marker) or marker in cmdline:
            found.append(int(entry.name))
    return found


def copy_lessons(dest: Path, names: list[str]) -> None:
    """Copy student notebooks (what learners open) into `dest`, which the server will serve."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(ROOT / "notebooks" / name, dest / name)


def launch_browser(playwright, profile: Path):
    """Debian's chromium through Playwright, headless, with a fresh profile folder."""
    return playwright.chromium.launch_persistent_context(
        str(profile),
        executable_path=CHROMIUM,
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": 1400, "height": 1000},
    )


# ---------------------------------------------------------------- driving a notebook in JupyterLab


def notebook(page):
    """The notebook panel on show (other tabs stay in the page, hidden)."""
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").first


def open_notebook(page, url: str) -> None:
    """Open a notebook and wait until its kernel (the course kernel, else fail) is idle.

    `reset` starts from an empty workspace, so that tabs of an earlier test are not restored.
    """
    page.goto(url + ("&" if "?" in url else "?") + "reset")
    name = url.split("?")[0].rsplit("/", 1)[-1]
    current = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
    current.filter(has_text=name).wait_for(timeout=60_000)
    notebook(page).locator(".jp-Cell").first.wait_for(timeout=60_000)
    kernel = notebook(page).locator("[data-jp-item-name='kernelName']")
    kernel.wait_for(timeout=30_000)
    deadline = time.monotonic() + 60
    while KERNEL_DISPLAY not in kernel.inner_text() and time.monotonic() < deadline:
        _select_course_kernel_if_asked(page)
        time.sleep(0.5)
    assert KERNEL_DISPLAY in kernel.inner_text(), f"kernel shown: {kernel.inner_text()!r}"
    wait_idle(page, 120)


def _select_course_kernel_if_asked(page) -> None:
    """JupyterLab asks for a kernel when the notebook's one is missing: choose the course kernel."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and dialog.locator("select").count():
        dialog.locator("select").select_option(label=KERNEL_DISPLAY)
        dialog.locator("button.jp-mod-accept").click()


def wait_idle(page, timeout: float) -> None:
    status = notebook(page).locator(".jp-Notebook-ExecutionIndicator")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if status.get_attribute("data-status") == "idle":
            return
        time.sleep(0.3)
    pytest.fail(f"kernel not idle after {timeout} s")


def run_all(page, timeout: float) -> float:
    """Run > Run All Cells, wait until every code cell has run; return the seconds it took."""
    started = time.monotonic()
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    prompts = notebook(page).locator(".jp-CodeCell .jp-InputArea-prompt")
    deadline = started + timeout
    while time.monotonic() < deadline:
        # text_content, not inner_text: cells scrolled out of view have no rendered text.
        texts = prompts.all_text_contents()
        if texts and all(re.fullmatch(r"\[\d+\]:", t.strip()) for t in texts):
            return time.monotonic() - started
        time.sleep(0.5)
    screenshot(page, "run-all-timeout")
    pytest.fail(f"cells still running after {timeout} s: {prompts.all_text_contents()}")


def run_cells(page, indices: list[int], timeout: float) -> float:
    """Run the notebook's cells at `indices` (positions in the .ipynb, markdown included) one after
    another, as a learner selects a cell and presses Shift+Enter; return the seconds it took."""
    started = time.monotonic()
    for index in indices:
        cell = cell_at(page, index)
        prompt = cell.locator(".jp-InputArea-prompt")
        before = prompt.text_content().strip()
        prompt.click()
        page.keyboard.press("Escape")  # command mode: Shift+Enter runs the selected cell
        page.keyboard.press("Shift+Enter")
        deadline = time.monotonic() + timeout
        while True:
            now = prompt.text_content().strip()
            if now != before and re.fullmatch(r"\[\d+\]:", now):
                break
            if time.monotonic() > deadline:
                screenshot(page, "run-cells-timeout")
                pytest.fail(f"cell {index} still running after {timeout} s (prompt {now!r})")
            time.sleep(0.3)
    return time.monotonic() - started


def cell_at(page, index: int):
    """The cell at position `index` of the notebook on show."""
    return notebook(page).locator(".jp-Cell").nth(index)


def cell_output(page, index: int, mime: str = "") -> str:
    """The text of a cell's outputs (of one mime type, else all), as the page shows it."""
    selector = f"[data-mime-type='{mime}']" if mime else ""
    texts = cell_at(page, index).locator(f".jp-OutputArea-output{selector}").all_text_contents()
    return "\n".join(texts)


# JupyterLab 4 shows a traceback (an "error" output) as text of this type too, like stderr.
STDERR = "application/vnd.jupyter.stderr"


def outputs(page, mime: str) -> list[str]:
    selector = f".jp-OutputArea-output[data-mime-type='{mime}']"
    return notebook(page).locator(selector).all_text_contents()


def assert_live_widget_answers(page, name: str) -> None:
    """Lesson 02's interact control is a live slider (not its text repr, which is all a server
    without the widget extension shows, with no error); moving it measures that setting."""
    interact = notebook(page).locator(".widget-interact").first
    interact.wait_for(timeout=30_000)
    reprs = re.compile(r"^(interactive|IntSlider|VBox)\(")
    # In outputs only: the lesson's text quotes that repr, to say what a missing extension shows.
    text_reprs = notebook(page).locator(".jp-OutputArea-output").get_by_text(reprs).count()
    assert text_reprs == 0, "a widget shown as its text repr: the server lacks the widget extension"
    slider = interact.locator(".widget-slider").first
    readout = slider.locator(".widget-readout")
    before = int(readout.inner_text())
    slider.locator(".noUi-handle, .ui-slider-handle, [role='slider']").first.press("ArrowRight")
    after = changed_readout(readout, before, timeout=10)  # the readout follows the key press
    assert after == before + 16, f"batch slider went from {before} to {after}, expected +16"
    assert interact.locator("button", has_text="Run Interact").count() == 0, "no button to press"
    answer = interact.locator(".jp-OutputArea-output")
    answer.filter(has_text=f"batch {after},").first.wait_for(timeout=60_000)
    assert re.search(rf"batch {after}, \d+ thread\(s\): [\d,]+ images/s", answer.first.inner_text())
    screenshot(interact, f"{name}-widget")


def changed_readout(readout, before: int, timeout: float) -> int:
    """The slider's readout once it shows another value than `before` (or `before` again after
    `timeout` seconds): the page redraws it after the key press, not with it."""
    deadline = time.monotonic() + timeout
    value = int(readout.inner_text())
    while value == before and time.monotonic() < deadline:
        time.sleep(0.1)
        value = int(readout.inner_text())
    return value


def screenshot(target, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    target.screenshot(path=str(path))
    return path


# ---------------------------------------------------------------- a centre's JupyterHub

HUB_CONFIG = """\
# A centre's hub, reduced to one machine: dummy logins, servers as local processes.
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{tmp}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{tmp}/cookie_secret"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{tmp}/home/{{username}}"
# Absolute paths: the hub does not search the centre venv's bin/ for these.
c.ConfigurableHTTPProxy.command = ["{proxy}"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.Spawner.cmd = ["{centre}/bin/jupyterhub-singleuser"]
# As root the single-user server refuses to start without it ("server never showed up").
c.Spawner.args = {args!r}
c.Spawner.default_url = "/lab"
c.Spawner.http_timeout = 120
c.Spawner.start_timeout = 120
"""


def write_hub_config(tmp: Path, port: int) -> Path:
    args = ["--allow-root"] if os.geteuid() == 0 else []
    config = tmp / "jupyterhub_config.py"
    config.write_text(
        HUB_CONFIG.format(
            port=port,
            hub_port=free_port(),
            proxy_api_port=free_port(),
            tmp=tmp,
            proxy=PROXY,
            centre=CENTRE,
            args=args,
        )
    )
    return config


def centre_kernel() -> Path:
    """Where the course kernel goes when a centre registers it in its own venv (README's step 2;
    test_hub_slurm.py). The centre's venv is a cache shared by every checkout on this machine."""
    return CENTRE / "share" / "jupyter" / "kernels" / "course"


def remove_centre_kernel() -> None:
    """No course kernel in the centre's venv: a server in a venv prefers the venv's kernels to a
    learner's --user one, so one left there (by test_hub_slurm, or a checkout since moved) would
    run another checkout's interpreter, or one that is gone ("No Kernel")."""
    shutil.rmtree(centre_kernel(), ignore_errors=True)


def register_course_kernel(home: Path) -> None:
    """What a learner does once in a terminal with the course environment: a --user kernel."""
    subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "python"),
            "-m",
            "ipykernel",
            "install",
            "--user",
            "--name",
            "course",
            "--display-name",
            KERNEL_DISPLAY,
        ],
        env=dict(os.environ, HOME=str(home)),
        check=True,
        capture_output=True,
    )


def hub_login(page, base: str, user: str) -> None:
    """Log in through the hub's form; the hub spawns the server and redirects into JupyterLab."""
    page.goto(f"{base}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", "any")
    page.click("#login_submit")
    page.wait_for_url(re.compile(rf"/user/{user}/lab"), timeout=150_000)


def add_cell_and_run(page, code: str) -> None:
    """Insert a cell below the last one, type `code` and run it, as a learner would."""
    last = notebook(page).locator(".jp-Cell").last
    last.click()
    page.keyboard.press("Escape")
    if last.locator(".cm-content").text_content().strip():  # else reuse the empty last cell
        page.keyboard.press("b")
    page.keyboard.press("Enter")
    page.keyboard.type(code)
    page.keyboard.press("Shift+Enter")
