"""`make site`: the Sphinx sources of the course's static site, from the committed notebooks.

    python -m course_utils.tooling.site [--out site/_build/src] [--mathjax DIR]

writes what `sphinx-build -c site` renders with myst-nb, which executes nothing: the site shows
the outputs stored in solutions/, which CI verified. README.md is read here, at build time, never
copied by hand:
    index.md         README's title and opening, its "## Lessons" table (every column it has,
                     each lesson linked), where the course runs, its "## Two commands"
    lessons/*.ipynb  each lesson as a learner gets it (`release_notebook`: exercise cells are
                     stubs, without outputs), every other cell with the outputs stored in
                     solutions/, and links to the student notebook, the lesson's batch scripts
                     and, where site/site.toml names a hub, an nbgitpuller link that opens it there
    on-a-cluster.md, grading.md   README's sections of those names
    _files/          the student notebooks and slurm/ scripts those links download
    _static/mathjax/ MathJax from npm (`make site` installs it), so math renders with no CDN
No lesson teaches it: it is the course's own tooling.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import nbformat

from course_utils.files import atomic_write, write_text_if_changed
from course_utils.grading.notebooks import course_meta, release_notebook
from course_utils.paths import REPO_ROOT
from course_utils.tooling.release import solution_paths

SETTINGS_FILE = REPO_ROOT / "site" / "site.toml"
SLURM_NAME = re.compile(r"\bslurm/([\w.-]+\.sh)\b")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = (
    "*An interactive control (ipywidgets) stands here when the notebook runs in JupyterLab; "
    "a static page cannot run it.*"
)
# What MathJax's tex-chtml.js loads on its own, beside it: TeX extensions, fonts, menu, speech.
MATHJAX_PARTS = ("tex-chtml.js", "input", "output/chtml", "ui", "a11y", "sre", "adaptors")
# The folders under --out that the builder fills (and prunes) alone.
OWN_FOLDERS = ("lessons", "_files", "_static/mathjax")
# The pages made from README's sections of these names (for centres and instructors).
README_PAGES = {"On a cluster": "on-a-cluster", "Grading": "grading"}
WHERE_IT_RUNS = """\
- **A laptop or workstation**, no GPU needed: `make lab` (below) sets up the environment and
  opens the lessons in JupyterLab.
- **A JupyterHub session**, CPU only is enough: register the course environment as a kernel
  ([On a cluster](on-a-cluster.md)){hub}.
- **A GPU node**: the GPU cells run there; elsewhere each says it is skipped and shows the same
  cells' results recorded on an NVIDIA GPU, labelled with device, PyTorch version and date.
- **A Slurm cluster**: each lesson's "On the cluster" section names its batch scripts, which its
  page links; [On a cluster](on-a-cluster.md) has the install routes and the centre's set-up.
"""


# Each setting of site/site.toml and the environment variable that overrides it.
ENVIRONMENT = {
    "hub": "COURSE_SITE_HUB",
    "repository": "COURSE_SITE_REPO",
    "branch": "COURSE_SITE_BRANCH",
}


@dataclass(frozen=True)
class Settings:
    """The site's settings: site/site.toml, each overridden by its environment variable."""

    hub: str = ""  # a JupyterHub's address; empty: no "open it on the hub" link
    repository: str = ""  # the course's git URL, which the hub pulls
    branch: str = "main"

    @classmethod
    def load(cls, path: Path = SETTINGS_FILE, environ: Mapping[str, str] = os.environ):
        import tomllib  # Python 3.11 on (make site's .venv); the package allows 3.10

        found = tomllib.loads(path.read_text()) if path.is_file() else {}
        unknown = sorted(set(found) - set(ENVIRONMENT))
        if unknown:
            raise ValueError(f"{path}: unknown settings {unknown}; known: {', '.join(ENVIRONMENT)}")
        values = {
            k: environ.get(var, found.get(k, getattr(cls, k))) for k, var in ENVIRONMENT.items()
        }
        return cls(**{key: str(value).strip() for key, value in values.items()})


def hub_link(settings: Settings, notebook: str) -> str | None:
    """nbgitpuller's link: the hub pulls the course into the learner's home and opens
    notebooks/`notebook` in JupyterLab. None where the settings name no hub or no repository."""
    if not (settings.hub and settings.repository):
        return None
    folder = settings.repository.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    query = {
        "repo": settings.repository,
        "branch": settings.branch,
        "urlpath": f"lab/tree/{folder}/notebooks/{notebook}",
    }
    return (
        f"{settings.hub.rstrip('/')}/hub/user-redirect/git-pull?{urlencode(query, quote_via=quote)}"
    )


# ---------------------------------------------------------------------------- README


def _unfenced(lines: list[str]):
    """(line, outside a ``` fence?) for each line: a `## ` inside a code block is no heading."""
    fenced = False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            yield line, False
        else:
            yield line, not fenced


def readme_sections(text: str) -> tuple[str, dict[str, str]]:
    """README split at its `## ` headings: (what precedes the first, {heading: body})."""
    head, sections, current = [], {}, None
    for line, outside in _unfenced(text.splitlines()):
        if outside and line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        else:
            (head if current is None else sections[current]).append(line)
    return "\n".join(head).strip(), {k: "\n".join(v).strip() for k, v in sections.items()}


def demote(markdown: str) -> str:
    """Headings one level up (`### x` -> `## x`): a README section becomes a page of its own."""
    lines = [
        line[1:] if outside and line.startswith("##") else line
        for line, outside in _unfenced(markdown.splitlines())
    ]
    return "\n".join(lines)


def before_subsections(markdown: str) -> str:
    """A section's text up to its first `### ` subsection."""
    lines = []
    for line, outside in _unfenced(markdown.splitlines()):
        if outside and line.startswith("### "):
            break
        lines.append(line)
    return "\n".join(lines).strip()


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def lesson_table(section: str, pages: Mapping[str, str]) -> str:
    """The section's table as it stands (whatever columns it has), each lesson's number and
    name linked to its page (`pages`: "05" -> "lessons/05_distributed_data_parallel")."""
    rows = [line for line in section.splitlines() if line.lstrip().startswith("|")]
    if len(rows) < 3:
        raise ValueError("README's '## Lessons' has no table of lessons (a header, a rule, rows)")
    header, rule, body = _cells(rows[0]), rows[1], [_cells(r) for r in rows[2:]]
    named = header.index("Lesson") if "Lesson" in header else 0
    out = ["| " + " | ".join(header) + " |", rule.strip()]
    for cells in body:
        page = pages.get(cells[0])
        if page:
            for i in {0, named}:
                cells[i] = f"[{cells[i]}]({page}.ipynb)"
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _replace_table(section: str, table: str) -> str:
    lines = section.splitlines()
    rows = [i for i, line in enumerate(lines) if line.lstrip().startswith("|")]
    return "\n".join([*lines[: rows[0]], table, *lines[rows[-1] + 1 :]])


def home_page(readme: str, pages: Mapping[str, str], settings: Settings) -> str:
    """index.md: what the course is, its lessons, where it runs, its two commands."""
    head, sections = readme_sections(readme)
    title, _, opening = head.partition("\n")
    lessons = before_subsections(sections["Lessons"])
    hub = " or open a lesson there with the link on its page" if hub_link(settings, "") else ""
    toc_lessons = "\n".join(pages.values())
    toc_more = "\n".join(README_PAGES.values())
    return f"""{title}

{opening.strip()}

## Lessons

{_replace_table(lessons, lesson_table(lessons, pages))}

## Where it runs

{WHERE_IT_RUNS.format(hub=hub)}
## Two commands

{sections["Two commands"]}

```{{toctree}}
:hidden:
:caption: Lessons

{toc_lessons}
```

```{{toctree}}
:hidden:
:caption: For centres and instructors

{toc_more}
```
"""


def readme_page(readme: str, heading: str) -> str:
    """A page made of README's `## heading` section, its subsections one level up."""
    _, sections = readme_sections(readme)
    return f"# {heading}\n\n{demote(sections[heading])}\n"


# ---------------------------------------------------------------------------- lessons


def lesson_notebook(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The student version of `solution`, with the stored outputs of every cell that is not an
    exercise: prose, code, plots, check lines and GPU references as CI verified them."""
    page = release_notebook(solution)
    for stored, cell in zip(solution.cells, page.cells, strict=True):
        assert stored.get("id") == cell.get("id"), "the release keeps cells in place"
        if cell.cell_type == "code" and course_meta(cell).get("role") != "exercise":
            cell.outputs = nbformat.from_dict(stored.outputs)
            cell.execution_count = stored.execution_count
    _widgets_as_notes(page)
    return page


def _widgets_as_notes(nb: nbformat.NotebookNode) -> None:
    """A widget needs a kernel: its view becomes a note, and the saved widget state goes (with
    it, myst-nb would load require.js and the widget manager from CDNs)."""
    nb.metadata.pop("widgets", None)
    note = nbformat.v4.new_output("display_data", data={"text/markdown": WIDGET_NOTE})
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [note if WIDGET_VIEW in o.get("data", {}) else o for o in cell.outputs]


def slurm_scripts(nb: nbformat.NotebookNode, slurm_dir: Path) -> list[Path]:
    """The batch scripts the lesson's text names (`slurm/ddp_srun.sh`) that exist."""
    text = "\n".join(cell.source for cell in nb.cells)
    names = sorted(set(SLURM_NAME.findall(text)))
    return [slurm_dir / name for name in names if (slurm_dir / name).is_file()]


def links_block(notebook: str, scripts: list[Path], hub: str | None) -> str:
    """The admonition under a lesson's title: the files to take away and where to open it."""
    items = [f"- {{download}}`Download the notebook </_files/notebooks/{notebook}>` ({notebook})"]
    if hub:
        items.append(f"- [Open it on the course's JupyterHub]({hub}) (nbgitpuller)")
    if scripts:
        files = ", ".join(f"{{download}}`{p.name} </_files/slurm/{p.name}>`" for p in scripts)
        items.append(f'- Batch scripts ("On the cluster"): {files}')
    body = "\n".join(items)
    return f"```{{admonition}} Work through this lesson\n:class: tip\n\n{body}\n```"


def add_links(nb: nbformat.NotebookNode, block: str) -> None:
    """Put `block` right under the lesson's title (its first `# ` heading)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("# "):
            title, _, rest = cell.source.partition("\n")
            cell.source = f"{title}\n\n{block}\n\n{rest.lstrip()}"
            return
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(block))


# ---------------------------------------------------------------------------- writing


def _copy(source: Path, dest: Path) -> Path:
    """Copy a file, atomically, only when it changed (Sphinx rebuilds what is newer)."""
    data = source.read_bytes()
    if not (dest.is_file() and dest.read_bytes() == data):
        atomic_write(dest, lambda f: f.write(data))
    return dest


def write_lesson(solution_path: Path, out: Path, settings: Settings) -> list[Path]:
    """lessons/NAME.ipynb and the files its page links; returns the paths written."""
    name = solution_path.name
    page = lesson_notebook(nbformat.read(solution_path, as_version=4))
    scripts = slurm_scripts(page, REPO_ROOT / "slurm")
    add_links(page, links_block(name, scripts, hub_link(settings, name)))
    written = [_copy(REPO_ROOT / "notebooks" / name, out / "_files" / "notebooks" / name)]
    written += [_copy(p, out / "_files" / "slurm" / p.name) for p in scripts]
    target = out / "lessons" / name
    write_text_if_changed(target, nbformat.writes(page) + "\n")
    return [*written, target]


def copy_mathjax(es5: Path, dest: Path) -> list[Path]:
    """The parts of MathJax's es5/ folder that tex-chtml.js loads, under `dest`."""
    if not (es5 / "tex-chtml.js").is_file():
        raise FileNotFoundError(f"no MathJax at {es5}; `make site` installs it with npm")
    written = []
    for part in MATHJAX_PARTS:
        source = es5 / part
        files = (
            [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
        )
        written += [_copy(p, dest / p.relative_to(es5)) for p in files]
    return written


def _prune(out: Path, keep: set[Path]) -> None:
    """Delete what an earlier build wrote and this one did not (a renamed lesson's page), in
    the builder's own folders only."""
    paths = [p for folder in OWN_FOLDERS for p in (out / folder).rglob("*")]
    for path in sorted(paths, reverse=True):
        if path.is_file() and path not in keep:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def build(out: Path, settings: Settings, mathjax: Path | None) -> list[Path]:
    """Write every source page under `out`; returns the paths written."""
    readme = (REPO_ROOT / "README.md").read_text()
    solutions = solution_paths(REPO_ROOT / "solutions")
    pages = {p.name[:2]: f"lessons/{p.stem}" for p in solutions}
    written = [p for path in solutions for p in write_lesson(path, out, settings)]
    texts = {"index.md": home_page(readme, pages, settings)}
    texts |= {f"{page}.md": readme_page(readme, head) for head, page in README_PAGES.items()}
    for name, text in texts.items():
        write_text_if_changed(out / name, text)
        written.append(out / name)
    if mathjax is not None:
        written += copy_mathjax(mathjax, out / "_static" / "mathjax")
    _prune(out, set(written))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "site" / "_build" / "src")
    parser.add_argument("--mathjax", type=Path, help="MathJax's es5/ folder (npm's mathjax@3)")
    args = parser.parse_args(argv)
    settings = Settings.load()
    written = build(args.out, settings, args.mathjax)
    hub = f"lessons open on {settings.hub}" if hub_link(settings, "x") else "no hub link"
    print(f"site sources: {len(written)} files in {args.out} ({hub}; settings: {SETTINGS_FILE})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
