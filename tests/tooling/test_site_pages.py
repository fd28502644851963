"""The site's pages as course_utils/tooling/site.py writes them (the built site, in a browser:
tests/integration/test_site.py)."""

import nbformat
import pytest

from course_utils.grading.notebooks import BEGIN, course_meta
from course_utils.paths import REPO_ROOT
from course_utils.tooling import site

SOLUTIONS = REPO_ROOT / "solutions"
README = """\
# The course

What it is.

## Two commands

```bash
make lab
## not a heading: inside a fence
```

## Lessons

| | Lesson | What you do | Time |
| --- | --- | --- | --- |
| 00 | Setup | set up | 40 min |
| 01 | Tensors | views | 1 h |

Each lesson has exercises.

### Map of the course

Not for learners.

## On a cluster

Routes.

### Widgets

A subsection.

## Grading

Checks.
"""
PAGES = {"00": "lessons/00_setup", "01": "lessons/01_tensors"}


def _read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(next(SOLUTIONS.glob(f"{name}_*.ipynb")), as_version=4)


def test_readme_sections_split_at_headings_outside_fences():
    head, sections = site.readme_sections(README)
    assert head == "# The course\n\nWhat it is."
    assert list(sections) == ["Two commands", "Lessons", "On a cluster", "Grading"]
    assert "## not a heading" in sections["Two commands"]


def test_the_lesson_table_keeps_every_column_and_links_each_lesson():
    _, sections = site.readme_sections(README)
    table = site.lesson_table(sections["Lessons"], PAGES).splitlines()
    assert table[0] == "|  | Lesson | What you do | Time |"
    assert table[2] == (
        "| [00](lessons/00_setup.ipynb) | [Setup](lessons/00_setup.ipynb) | set up | 40 min |"
    )


def test_a_readme_without_a_lesson_table_is_named():
    with pytest.raises(ValueError, match="no table of lessons"):
        site.lesson_table("Just prose.", PAGES)


def test_the_home_page():
    home = site.home_page(README, PAGES, site.Settings())
    assert home.startswith("# The course\n\nWhat it is.\n\n## Lessons\n")
    assert "| 40 min |" in home and "Each lesson has exercises." in home
    assert "Map of the course" not in home
    assert "## Where it runs" in home and "make lab" in home
    assert "lessons/00_setup\nlessons/01_tensors" in home and "on-a-cluster\ngrading" in home
    assert "open a lesson there" not in home
    hub = site.Settings(hub="https://hub.example.org", repository="https://git.example.org/c.git")
    assert "open a lesson there" in site.home_page(README, PAGES, hub)


def test_a_readme_section_becomes_a_page_one_level_up():
    page = site.readme_page(README, "On a cluster")
    assert page == "# On a cluster\n\nRoutes.\n\n## Widgets\n\nA subsection.\n"


def test_settings_from_the_file_and_the_environment(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text('hub = "https://hub.example.org"\nrepository = ""\n')
    assert site.Settings.load(path, {}) == site.Settings(hub="https://hub.example.org")
    environ = {"COURSE_SITE_REPO": "https://git.example.org/course.git", "COURSE_SITE_HUB": ""}
    assert site.Settings.load(path, environ) == site.Settings(
        repository="https://git.example.org/course.git"
    )
    path.write_text('hubb = "x"\n')
    with pytest.raises(ValueError, match=r"unknown settings \['hubb'\]; known: hub, repository"):
        site.Settings.load(path, {})


def test_the_hub_link_is_nbgitpuller_s_and_needs_hub_and_repository():
    assert site.hub_link(site.Settings(hub="https://hub.example.org"), "05_x.ipynb") is None
    settings = site.Settings(
        hub="https://hub.example.org/", repository="https://g.org/a/course.git"
    )
    assert site.hub_link(settings, "05_x.ipynb") == (
        "https://hub.example.org/hub/user-redirect/git-pull?repo=https%3A%2F%2Fg.org%2Fa%2F"
        "course.git&branch=main&urlpath=lab%2Ftree%2Fcourse%2Fnotebooks%2F05_x.ipynb"
    )


def test_a_lesson_page_is_the_student_version_with_the_stored_outputs():
    solution = _read("01")
    page = site.lesson_notebook(solution)
    assert len(page.cells) == len(solution.cells)
    for stored, cell in zip(solution.cells, page.cells):
        assert BEGIN not in cell.source
        if cell.cell_type != "code":
            continue
        if course_meta(cell).get("role") == "exercise":
            assert "raise NotImplementedError" in cell.source and cell.outputs == []
        else:
            assert cell.source == stored.source and cell.outputs == stored.outputs
    assert any(c.get("outputs") for c in page.cells)


def test_a_widget_becomes_a_note_and_its_state_goes():
    page = site.lesson_notebook(_read("02"))
    assert "widgets" not in page.metadata
    outputs = [o for c in page.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if site.WIDGET_VIEW in o.get("data", {})]
    assert [o for o in outputs if o.get("data", {}).get("text/markdown") == site.WIDGET_NOTE]


def test_the_links_under_a_lesson_s_title():
    nb = _read("05")
    scripts = site.slurm_scripts(nb, REPO_ROOT / "slurm")
    assert [p.name for p in scripts] == [
        "checkpoint_requeue.sh",  # where a --signal belongs: a script that traps it
        "config.sh",
        "ddp_srun.sh",
        "ddp_torchrun.sh",
        "mps_job.sh",
    ]
    block = site.links_block("05_x.ipynb", scripts, None)
    assert "{download}`Download the notebook </_files/notebooks/05_x.ipynb>`" in block
    assert "{download}`ddp_srun.sh </_files/slurm/ddp_srun.sh>`" in block
    assert "JupyterHub" not in block
    assert "[Open it on the course's JupyterHub](https://hub/x)" in site.links_block(
        "05_x.ipynb", scripts, "https://hub/x"
    )
    site.add_links(nb, block)
    title, _, rest = nb.cells[0].source.partition("\n\n")
    assert title == "# 05 Distributed data parallel" and rest.startswith(block)


def test_a_rebuild_removes_what_the_last_build_wrote_and_this_one_did_not(tmp_path):
    old = tmp_path / "lessons" / "11_gone.ipynb"
    old.parent.mkdir()
    old.write_text("{}")
    kept = tmp_path / "lessons" / "00_setup.ipynb"
    kept.write_text("{}")
    other = tmp_path / "notes.md"  # not the builder's: left alone
    other.write_text("mine")
    site._prune(tmp_path, {kept})
    assert not old.exists() and kept.exists() and other.exists()
