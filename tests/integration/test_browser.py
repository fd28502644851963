"""The course where learners meet it: JupyterLab (as `make lab` starts it) and a centre's
JupyterHub, in headless Chromium driven by Playwright. Each test opens a lesson, runs every cell
with the course kernel and reads the result off the page: no error output, the `course doctor`
table, the ipywidgets control live (not its text repr) and answering a change, the matplotlib
figure as an image.

The lessons are copies of the student notebooks (notebooks/) in a temporary folder: that is what a
learner opens, and the unfinished exercises must not break a run (check cells print "not attempted
yet"); the copy keeps JupyterLab's autosave from writing outputs into notebooks/.
Screenshots go to test-artifacts/browser/. Set-up: .ci/browser-setup.sh.
"""

from __future__ import annotations

import os
import re
import time

import browser_support as bs
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LESSON_00, LESSON_02 = "00_setup.ipynb", "02_cpu_to_gpu.ipynb"
RUN_TIMEOUT = 600  # lesson 02 runs about a minute on two idle cores, minutes on busy ones


@pytest.fixture(scope="module")
def playwright():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture
def page(playwright, tmp_path):
    context = bs.launch_browser(playwright, tmp_path / "chromium-profile")
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`make lab` serving a temporary copy of lessons 00 and 02; yields (base URL, token)."""
    tmp = tmp_path_factory.mktemp("lab")
    bs.copy_lessons(tmp / "lessons", [LESSON_00, LESSON_02])
    port, token = bs.free_port(), "browser-test-token"
    # JupyterLab's workspace (open tabs) and settings go to tmp, not to this user's ~/.jupyter.
    env = dict(
        os.environ,
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
    )
    proc = bs.start(
        [
            "make",
            "--no-print-directory",
            "lab",
            f"PORT={port}",
            f"TOKEN={token}",
            f"LAB_DIR={tmp / 'lessons'}",
        ],
        tmp / "lab.log",
        cwd=bs.ROOT,
        env=env,
    )
    try:
        bs.wait_for_http(f"http://127.0.0.1:{port}/api/status", proc, tmp / "lab.log", 300)
        yield f"http://127.0.0.1:{port}", token
    finally:
        bs.stop(proc)


def _run_lesson(page, url: str, name: str) -> float:
    """Open, run all cells, screenshot; assert no error or stderr output; return seconds."""
    bs.open_notebook(page, url)
    seconds = bs.run_all(page, RUN_TIMEOUT)
    bs.screenshot(page, name)
    stderr = bs.outputs(page, bs.STDERR)
    assert not stderr, f"error or stderr output (warnings) in {url}:\n" + "\n".join(stderr)[:3000]
    return seconds


def _assert_doctor_table(page) -> None:
    text = "\n".join(bs.outputs(page, "application/vnd.jupyter.stdout"))
    for topic in ("pytorch", "cpu threads", "jupyter kernel", "widgets"):
        assert re.search(rf"^{re.escape(topic)}\s+\[\s*\w+\s*\]", text, re.M), (topic, text[-2000:])
    assert re.search(r"^jupyter kernel\s+\[\s*ok\s*\]", text, re.M), text[-2000:]
    assert re.search(r"^widgets\s+\[\s*ok\s*\]", text, re.M), text[-2000:]


def _assert_figure(page, name: str) -> None:
    image = bs.notebook(page).locator(".jp-RenderedImage img[src^='data:image/png']").first
    image.wait_for(timeout=10_000)
    width = image.evaluate("img => img.naturalWidth")
    assert width >= 300, f"figure {width} px wide"
    image.scroll_into_view_if_needed()
    page.wait_for_timeout(500)  # cells re-lay out as they come into view
    bs.screenshot(image, f"{name}-figure")


def test_lab_lesson00_shows_doctor_table(page, lab):  # page first: no server without a browser
    base, token = lab
    seconds = _run_lesson(page, f"{base}/lab/tree/{LESSON_00}?token={token}", "lab-00")
    _assert_doctor_table(page)
    print(f"lesson 00 ran in the browser in {seconds:.1f} s")


def test_lab_lesson02_widget_and_figure(page, lab):
    base, token = lab
    seconds = _run_lesson(page, f"{base}/lab/tree/{LESSON_02}?token={token}", "lab-02")
    _assert_figure(page, "lab-02")
    bs.assert_live_widget_answers(page, "lab-02")
    print(f"lesson 02 ran in the browser in {seconds:.1f} s")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A centre's JupyterHub from its own venv; the course environment only a registered kernel.

    Yields (base URL, the learner's home). Lesson 00 lies in the home, which the server serves.
    """
    tmp = tmp_path_factory.mktemp("hub")
    home = tmp / "home" / "learner"
    bs.copy_lessons(home, [LESSON_00])
    bs.remove_centre_kernel()  # this centre offers none: the learner registers their own
    bs.register_course_kernel(home)
    port = bs.free_port()
    config = bs.write_hub_config(tmp, port)
    proc = bs.start(
        [str(bs.CENTRE / "bin" / "jupyterhub"), "-f", str(config)], tmp / "hub.log", cwd=tmp
    )
    try:
        hub_api = f"http://127.0.0.1:{port}/hub/api"
        bs.wait_for_http(hub_api, proc, tmp / "hub.log", 120, statuses=(200,))
        yield f"http://127.0.0.1:{port}", home
    finally:
        # The hub stops the learner's server and the proxy; anything left running from tmp goes.
        bs.stop(proc, leftovers_under=tmp)


def test_hub_learner_runs_lesson00_and_widgets_render(page, hub):
    base, home = hub
    started = time.monotonic()
    bs.hub_login(page, base, "learner")
    spawned = time.monotonic() - started
    seconds = _run_lesson(page, f"{base}/user/learner/lab/tree/{LESSON_00}", "hub-00")
    # doctor, run by the course kernel, read the centre's widget extension through its server.
    _assert_doctor_table(page)
    text = "\n".join(bs.outputs(page, "application/vnd.jupyter.stdout"))
    assert re.search(rf"^widgets .*server in {re.escape(str(bs.CENTRE))}", text, re.M), text
    # The lesson's widget and figure need nothing else from the kernel side (test_lab_lesson02 runs
    # them); here what differs is the server, so a learner's probe cell suffices.
    bs.add_cell_and_run(page, "import ipywidgets as w; w.IntSlider(value=7, description='probe')")
    slider = bs.notebook(page).locator(".widget-slider").last
    slider.wait_for(timeout=30_000)
    readout = slider.locator(".widget-readout")
    assert readout.inner_text() == "7"
    slider.locator("[role='slider'], .noUi-handle").first.press("ArrowRight")
    assert bs.changed_readout(readout, 7, timeout=10) == 8  # redrawn after the key press
    bs.add_cell_and_run(page, "import matplotlib.pyplot as plt; plt.plot([1, 4, 9]); plt.show()")
    _assert_figure(page, "hub-probe")
    bs.screenshot(page, "hub-00-probes")
    print(f"hub: login + spawn {spawned:.1f} s, lesson 00 {seconds:.1f} s")
