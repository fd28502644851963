"""The course's static site (`make site`) as a reader meets it, built once here into
site/_build/html from the committed notebooks (course_utils/tooling/site.py, Sphinx + myst-nb).

- No solution reaches it: no distinctive line of any `### BEGIN SOLUTION` block of solutions/
  is in a page, the search index or a download (marked slow: it needs the built site only).
- Nothing is loaded from outside: no page or stylesheet loads a script, stylesheet, font or image
  from another host (slow).
- In headless Chromium (marked browser), the site served on 127.0.0.1: every page loads with no
  failed request and none leaving 127.0.0.1, draws every image, and its internal links resolve;
  the search page finds a word that only lesson 05 has; math renders from the site's own
  MathJax (on a one-page site with the same settings: no lesson has math yet).
  Screenshots of the home page and lesson 05: test-artifacts/site/.
The unmarked tests at the end show that the two static checks fail on a page that breaks them.
"""

from __future__ import annotations

import contextlib
import functools
import html
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import browser_support as bs
import nbformat
import needs
import pytest

from course_utils.grading.notebooks import BEGIN, END, course_meta, release_notebook
from course_utils.tooling.release import solution_paths

SITE = bs.ROOT / "site" / "_build" / "html"
SOLUTIONS = bs.ROOT / "solutions"
ARTIFACTS = bs.ROOT / "test-artifacts" / "site"
# Words of lesson 05 that no other lesson had; the search test takes the first that is still on
# lesson 05's page alone (lessons change) and fails when none is.
ONLY_IN_05 = ("DistributedSampler", "SyncBatchNorm", "fully_shard", "convert_sync_batchnorm")
LESSON_05 = "lessons/05_distributed_data_parallel.html"
# Where a line of a solution could show: pages, the search index, the files pages link.
HAYSTACK = ("**/*.html", "searchindex.js", "_downloads/**/*")
MIN_LINE = 12  # shorter lines (`return x`, `)`, `else:`) say nothing of a solution


# ---------------------------------------------------------------------------- the checks


def squeeze(text: str) -> str:
    return " ".join(text.split())


def page_text(markup: str) -> str:
    """What a page says, tags dropped (a highlighted line of code is one span per token)."""
    return squeeze(html.unescape(re.sub(r"<[^>]*>", "", markup)))


def solution_lines(nb: nbformat.NotebookNode) -> list[str]:
    """The lines between BEGIN and END SOLUTION, whitespace squeezed."""
    lines, inside = [], False
    for cell in nb.cells:
        for line in cell.source.splitlines():
            if line.strip() in (BEGIN, END):
                inside = line.strip() == BEGIN
            elif inside and line.strip():
                lines.append(squeeze(line))
    return lines


def _output_text(output) -> str:
    data = output.get("data", {})
    parts = [output.get("text", "")] + [data.get(m, "") for m in ("text/plain", "text/markdown")]
    return "\n".join(p if isinstance(p, str) else "".join(p) for p in parts)


def as_rendered(markdown: str) -> str:
    """Markdown as a page shows it: no backticks or emphasis marks, a link's text alone
    (prose may say return `"runs"`, which a page shows as return "runs")."""
    return re.sub(r"[`*]", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown))


def shown_text(solution: nbformat.NotebookNode) -> str:
    """All the site may show of a lesson: the released notebook's cells (prose also as
    rendered), and the stored outputs of every cell that is not an exercise."""
    cells = release_notebook(solution).cells
    prose = [as_rendered(c.source) for c in cells if c.cell_type == "markdown"]
    outputs = [
        _output_text(o)
        for c in solution.cells
        if c.cell_type == "code" and course_meta(c).get("role") != "exercise"
        for o in c.outputs
    ]
    return "\n".join([c.source for c in cells] + prose + outputs)


@functools.cache
def distinctive_lines(paths: tuple[Path, ...]) -> dict[str, str]:
    """{line: lesson} for each solution line that nothing the site may show contains: not the
    released notebooks, the non-exercise cells and their outputs, README or the batch scripts."""
    solutions = {p.name[:2]: nbformat.read(p, as_version=4) for p in paths}
    shown = [shown_text(nb) for nb in solutions.values()]
    readme = (bs.ROOT / "README.md").read_text()
    shown += [readme, as_rendered(readme)]
    shown += [p.read_text() for p in sorted((bs.ROOT / "slurm").glob("*.sh"))]
    allowed = squeeze("\n".join(shown))
    return {
        line: lesson
        for lesson, nb in solutions.items()
        for line in solution_lines(nb)
        if len(line) >= MIN_LINE and line not in allowed
    }


def _file_text(path: Path) -> str:
    """A file as a reader sees it: a page's text, a notebook's cells and outputs (not its JSON,
    whose escapes would mimic a Python string literal), any other file as it is."""
    raw = path.read_text(errors="replace")
    if path.suffix == ".html":
        return page_text(raw)
    if path.suffix == ".ipynb":
        nb = nbformat.reads(raw, as_version=4)
        outputs = [_output_text(o) for c in nb.cells for o in c.get("outputs", [])]
        return squeeze("\n".join([c.source for c in nb.cells] + outputs))
    return squeeze(raw)


def leaks(site: Path, lines: dict[str, str]) -> list[str]:
    """'file: line (lesson NN)' for each distinctive solution line found in the built site."""
    found = []
    for pattern in HAYSTACK:
        for path in sorted(p for p in site.glob(pattern) if p.is_file()):
            text, rel = _file_text(path), path.relative_to(site)
            found += [f"{rel}: {line!r} (lesson {n})" for line, n in lines.items() if line in text]
    return found


# Attributes whose URL the browser loads (a plain <a href> is only a link).
LOADS = {
    "script": ("src",),
    "img": ("src", "srcset"),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "iframe": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "input": ("src",),
}
LOADED_RELS = {"stylesheet", "icon", "preload", "prefetch", "modulepreload", "manifest"}
LOADED_RELS |= {"preconnect", "dns-prefetch", "apple-touch-icon", "mask-icon"}
OUTSIDE = re.compile(r"^\s*(https?:)?//", re.I)
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.I)


class _Loads(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.in_style = False

    def handle_starttag(self, tag, attrs):
        self.in_style = tag == "style"
        attrs = dict(attrs)
        names = LOADS.get(tag, ())
        if tag == "link" and set((attrs.get("rel") or "").lower().split()) & LOADED_RELS:
            names = ("href",)
        for name in names:
            value = attrs.get(name) or ""
            self.urls += [part.split()[0] for part in value.split(",") if part.strip()]
        self.urls += [m[0] or m[1] for m in CSS_URL.findall(attrs.get("style") or "")]

    def handle_endtag(self, tag):
        self.in_style = False

    def handle_data(self, data):  # a <style>'s @import and url(); prose may quote them
        if self.in_style:
            self.urls += [m[0] or m[1] for m in CSS_URL.findall(data)]


def external_loads(site: Path) -> list[str]:
    """'file: url' for each resource a page or stylesheet loads from another host."""
    found = []
    for path in sorted(site.rglob("*.html")) + sorted(site.rglob("*.css")):
        text = path.read_text(errors="replace")
        if path.suffix == ".css":
            urls = [m[0] or m[1] for m in CSS_URL.findall(text)]
        else:
            parser = _Loads()
            parser.feed(text)
            urls = parser.urls
        found += [f"{path.relative_to(site)}: {u}" for u in urls if OUTSIDE.match(u)]
    return found


# ---------------------------------------------------------------------------- the built site


@pytest.fixture(scope="module")
def site() -> Path:
    """`make site` (its packages and MathJax installed once; then no network)."""
    if shutil.which("npm") is None:
        reason = "npm is missing: `make site` installs MathJax with it"
        if needs.in_ci():  # CI installs what the long lane needs: fail, never hide it
            pytest.fail(reason)
        pytest.skip(reason)
    done = subprocess.run(
        ["make", "--no-print-directory", "site"],
        cwd=bs.ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"make site failed:\n{(done.stdout + done.stderr)[-4000:]}"
    return SITE


def _pages(site: Path) -> list[str]:
    return sorted(
        str(p.relative_to(site)) for p in site.rglob("*.html") if "_static" not in p.parts
    )


@pytest.mark.slow
def test_the_site_has_every_lesson_and_readme_page(site):
    pages = _pages(site)
    lessons = [f"lessons/{p.stem}.html" for p in solution_paths(SOLUTIONS)]
    assert set(lessons) <= set(pages), sorted(set(lessons) - set(pages))
    assert {"index.html", "on-a-cluster.html", "grading.html", "search.html"} <= set(pages)
    for name in lessons:
        assert any((site / "_downloads").glob(f"*/{Path(name).stem}.ipynb")), f"no download: {name}"


@pytest.mark.slow
def test_no_solution_reaches_the_site(site):
    lines = distinctive_lines(tuple(solution_paths(SOLUTIONS)))
    assert len(lines) > 100, f"only {len(lines)} distinctive solution lines: is the rule right?"
    assert leaks(site, lines) == []


@pytest.mark.slow
def test_nothing_is_loaded_from_outside(site):
    assert external_loads(site) == []
    # math renders from the site's own MathJax, where a page has math
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file()
    assert (site / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


# ---------------------------------------------------------------------------- in the browser


@contextlib.contextmanager
def serving(folder: Path, log: Path):
    """`folder` on 127.0.0.1 (python's http.server); yields its base URL."""
    port = bs.free_port()
    command = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "-d", str(folder)]
    proc = bs.start([*command, str(port)], log)
    base = f"http://127.0.0.1:{port}/"
    try:
        bs.wait_for_http(base, proc, log, 30, statuses=(200,))
        yield base
    finally:
        bs.stop(proc)


@pytest.fixture(scope="module")
def served(site, tmp_path_factory):
    with serving(site, tmp_path_factory.mktemp("site") / "http.log") as base:
        yield base


@pytest.fixture(scope="module")
def browser_page(served, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = bs.launch_browser(playwright, tmp_path_factory.mktemp("chromium-profile"))
        try:
            yield context.new_page()
        finally:
            context.close()


class Visit:
    """One page opened as a reader opens it, with every request it made."""

    def __init__(self, page, url: str):
        self.requests, self.failed = [], []
        page.on("request", self._request)
        page.on("requestfailed", self._failed)
        page.on("response", self._response)
        try:
            page.goto(url, wait_until="networkidle")
            if page.locator(".math").count():  # MathJax typesets it (from the site itself)
                page.locator("mjx-container").first.wait_for(timeout=30_000)
        finally:
            page.remove_listener("request", self._request)
            page.remove_listener("requestfailed", self._failed)
            page.remove_listener("response", self._response)

    def _request(self, request):
        self.requests.append(request.url)

    def _failed(self, request):
        self.failed.append(f"{request.url}: {request.failure}")

    def _response(self, response):
        if response.status >= 400:
            self.failed.append(f"{response.url}: HTTP {response.status}")


BROKEN_IMAGES = "() => [...document.images].filter(i => !i.naturalWidth).map(i => i.src)"
HREFS = "els => els.map(e => e.href)"


@functools.cache
def _anchors(path: Path) -> set[str]:
    return set(re.findall(r'\b(?:id|name)="([^"]+)"', path.read_text(errors="replace")))


def broken_links(site: Path, base: str, hrefs: list[str]) -> list[str]:
    """Links into the site whose file, or whose anchor in it, is missing."""
    broken = []
    for href in sorted(set(hrefs)):
        if not href.startswith(base):
            continue
        url = urlparse(href)
        target = site / unquote(url.path)[1:]
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            broken.append(f"{href}: no file")
        elif (
            url.fragment
            and target.suffix == ".html"
            and unquote(url.fragment) not in _anchors(target)
        ):
            broken.append(f"{href}: no anchor")
    return broken


@pytest.mark.browser
@pytest.mark.slow
def test_every_page_loads_everything_from_the_site(site, served, browser_page):
    problems, images = [], 0
    for name in _pages(site):
        visit = Visit(browser_page, served + name)
        outside = [u for u in visit.requests if not u.startswith((served, "data:", "blob:"))]
        broken = browser_page.evaluate(BROKEN_IMAGES)
        hrefs = browser_page.eval_on_selector_all("a[href]", HREFS)
        images += browser_page.evaluate("() => document.images.length")
        problems += [f"{name}: failed {f}" for f in visit.failed]
        problems += [f"{name}: loads {u} from outside" for u in outside]
        problems += [f"{name}: broken image {u}" for u in broken]
        problems += [f"{name}: link {b}" for b in broken_links(site, served, hrefs)]
    assert problems == []
    assert images >= 4, "lessons 02, 08 and 10 show their plots"


@pytest.mark.browser
@pytest.mark.slow
def test_search_finds_a_word_of_lesson_05(site, served, browser_page):
    texts = {p: page_text((site / p).read_text()) for p in _pages(site)}
    having = {w: [p for p, text in texts.items() if w in text] for w in ONLY_IN_05}
    unique = [w for w, pages in having.items() if set(pages) - {"search.html"} == {LESSON_05}]
    assert unique, f"no word of lesson 05 alone: {having}"
    Visit(browser_page, f"{served}search.html?q={unique[0]}")
    results = browser_page.locator("#search-results ul.search li a")
    results.first.wait_for(timeout=30_000)
    found = {urlparse(h).path.lstrip("/") for h in results.evaluate_all(HREFS)}
    assert LESSON_05 in found, found


@pytest.mark.browser
@pytest.mark.slow
def test_screenshots_of_the_home_page_and_lesson_05(served, browser_page):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name, page in (("home", "index.html"), ("lesson-05", LESSON_05)):
        Visit(browser_page, served + page)
        browser_page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    assert (ARTIFACTS / "lesson-05.png").stat().st_size > 10_000


MATH_PAGE = "# Math\n\nInline $\\sigma = \\sqrt{n}$, displayed:\n\n$$\n\\sum_{i=1}^n x_i\n$$\n"


@pytest.mark.browser
@pytest.mark.slow
def test_math_renders_from_the_site_s_own_mathjax(site, browser_page, tmp_path):
    """No lesson has math yet: a one-page site built with the site's settings (conf.py, the
    MathJax `make site` copied) shows that math renders with nothing loaded from outside."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "index.md").write_text(MATH_PAGE)
    build = [sys.executable, "-m", "sphinx", "-q", "-W", "-c", "site", tmp_path / "src"]
    subprocess.run([*build, tmp_path / "html"], cwd=bs.ROOT, check=True, timeout=300)
    with serving(tmp_path / "html", tmp_path / "http.log") as base:
        visit = Visit(browser_page, base + "index.html")
        outside = [u for u in visit.requests if not u.startswith(base)]
        assert (visit.failed, outside) == ([], [])
        assert browser_page.locator("mjx-container").count() == 2
        assert f"{base}_static/mathjax/tex-chtml.js" in [u.split("?")[0] for u in visit.requests]


# ---------------------------------------------------------------------------- the checks can fail


def _highlighted(line: str) -> str:
    """A line of code as Pygments writes it: one span per token."""
    tokens = re.findall(r"\w+|\s+|[^\w\s]", line)
    return "".join(f'<span class="n">{html.escape(t)}</span>' for t in tokens)


def test_a_solution_line_on_a_page_is_found(tmp_path):
    paths = tuple(p for p in solution_paths(SOLUTIONS) if p.name.startswith("01_"))
    line, lesson = next(iter(distinctive_lines(paths).items()))
    (tmp_path / "lessons").mkdir()  # where the lesson pages are
    (tmp_path / "lessons" / "01.html").write_text(f"<pre>  {_highlighted(line)}\n</pre>")
    (tmp_path / "index.html").write_text("<pre>raise NotImplementedError</pre>")
    assert leaks(tmp_path, {line: lesson}) == [f"lessons/01.html: {line!r} (lesson {lesson})"]


def test_a_solution_line_in_a_download_is_found(tmp_path):
    (tmp_path / "_downloads" / "abc").mkdir(parents=True)
    cell = nbformat.v4.new_code_cell("def f(x):\n    y = x.view(-1, 12)")
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), tmp_path / "_downloads/abc/01.ipynb")
    assert leaks(tmp_path, {"y = x.view(-1, 12)": "01"}) == [
        "_downloads/abc/01.ipynb: 'y = x.view(-1, 12)' (lesson 01)"
    ]


def test_an_outside_resource_is_found(tmp_path):
    (tmp_path / "page.html").write_text(
        '<a href="https://pytorch.org">docs</a><link rel="index" href="https://x.org/i">'
        '<script src="https://cdn.example.org/require.js"></script>'
        '<link rel="stylesheet" href="//fonts.example.org/css">'
        '<img src="_images/plot.png"><div style="background: url(http://x.org/a.png)"></div>'
        "<style>@import 'https://fonts.example.org/x.css';</style>"
        "<p>CSS says url(https://example.org/in-prose.png)</p>"
    )
    (tmp_path / "theme.css").write_text(
        "@font-face { src: url('https://fonts.example.org/f.woff2') }"
    )
    assert external_loads(tmp_path) == [
        "page.html: https://cdn.example.org/require.js",
        "page.html: //fonts.example.org/css",
        "page.html: http://x.org/a.png",
        "page.html: https://fonts.example.org/x.css",
        "theme.css: https://fonts.example.org/f.woff2",
    ]
