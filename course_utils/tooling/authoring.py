"""For course authors: convert between solution notebooks and percent-format scripts, and execute.

solutions/*.ipynb are the single source. To edit one comfortably as text:
    python -m course_utils.tooling.authoring to-py solutions/01_tensors.ipynb /tmp/01.py
    ...edit /tmp/01.py...
    python -m course_utils.tooling.authoring build /tmp/01.py solutions/01_tensors.ipynb
(`build` executes it)
then `course release`. To run a solution notebook again as it is (after a helper or a checker
changed what it prints), keeping its cell ids:
    python -m course_utils.tooling.authoring execute solutions/01_tensors.ipynb
A cell header carries metadata as key=JSON pairs, for example
    # %% tags=["nbval-ignore-output"]
    # %% course={"exercise": "01.2", "role": "exercise", "points": 1}
    # %% [markdown]
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_utils.files import atomic_write_text

HEADER = re.compile(r"^# %%(?P<rest>.*)$")
PAIR = re.compile(r"(\w+)=")
KERNELSPEC = {"name": "course", "display_name": "PyTorch on HPC (course)", "language": "python"}


def _parse_header(rest: str) -> tuple[str, dict]:
    rest = rest.strip()
    kind = "code"
    if rest.startswith("[markdown]"):
        kind, rest = "markdown", rest[len("[markdown]") :].strip()
    meta, decoder = {}, json.JSONDecoder()
    while rest:
        m = PAIR.match(rest)
        if not m:
            raise ValueError(f"cannot read cell header metadata {rest!r}; write key=JSON pairs")
        value, end = decoder.raw_decode(rest[m.end() :])
        meta[m.group(1)] = value
        rest = rest[m.end() + end :].strip()
    return kind, meta


def _cell(kind: str, meta: dict, lines: list[str]):
    while lines and not lines[-1].strip():
        lines.pop()
    if kind == "markdown":
        text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines)
        return nbformat.v4.new_markdown_cell(text, metadata=meta)
    return nbformat.v4.new_code_cell("\n".join(lines), metadata=meta)


def py_to_notebook(text: str) -> nbformat.NotebookNode:
    cells, kind, meta, lines = [], None, {}, []
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            if kind is not None:
                cells.append(_cell(kind, meta, lines))
            (kind, meta), lines = _parse_header(m["rest"]), []
        elif kind is not None:
            lines.append(line)
    if kind is not None:
        cells.append(_cell(kind, meta, lines))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def notebook_to_py(nb: nbformat.NotebookNode) -> str:
    chunks = []
    for cell in nb.cells:
        pairs = " ".join(f"{k}={json.dumps(v)}" for k, v in cell.metadata.items())
        if cell.cell_type == "markdown":
            body = "\n".join(f"# {line}" if line else "#" for line in cell.source.splitlines())
            chunks.append(f"# %% [markdown] {pairs}".rstrip() + "\n" + body)
        else:
            chunks.append(f"# %% {pairs}".rstrip() + "\n" + cell.source)
    return "\n\n".join(chunks) + "\n"


def execute(nb: nbformat.NotebookNode, workdir: Path, timeout: float = 900) -> float:
    """Run the notebook in `workdir` with the current environment's kernel; returns seconds."""
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(workdir)}},
    ).execute()
    return time.perf_counter() - start


def keep_cell_ids(nb: nbformat.NotebookNode, previous: Path) -> None:
    """Reuse the cell ids of the previous build, position by position, so diffs show real edits."""
    if previous.exists():
        old = nbformat.read(previous, as_version=4).cells
        for cell, old_cell in zip(nb.cells, old):
            if "id" in old_cell:
                cell.id = old_cell.id


def build(source: Path, target: Path) -> None:
    nb = py_to_notebook(source.read_text())
    keep_cell_ids(nb, target)
    seconds = execute(nb, target.parent)
    atomic_write_text(target, nbformat.writes(nb) + "\n")
    print(f"built and executed {target} in {seconds:.1f} s")


def execute_in_place(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    seconds = execute(nb, path.parent)
    atomic_write_text(path, nbformat.writes(nb) + "\n")
    print(f"executed {path} in {seconds:.1f} s")


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "execute":
        execute_in_place(Path(argv[1]))
        return 0
    if len(argv) != 3 or argv[0] not in ("build", "to-py"):
        print(__doc__)
        return 2
    action, src, dst = argv[0], Path(argv[1]), Path(argv[2])
    if action == "build":
        build(src, dst)
    else:
        atomic_write_text(dst, notebook_to_py(nbformat.read(src, as_version=4)))
        print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
