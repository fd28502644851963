"""`course check NN`: run a learner's lesson notebook and report each exercise's verdict."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_utils.grading import lesson_exercises, parse_verdicts
from course_utils.release import course_meta


def find_notebook(lesson: str, folder: Path) -> Path:
    matches = sorted(folder.glob(f"{lesson}_*.ipynb"))
    if not matches:
        raise ValueError(f"no notebook {lesson}_*.ipynb in {folder}; pass --notebook PATH")
    return matches[0]


def check_cell_text(nb) -> str:
    """All stream output of the notebook's check cells, which print the verdict lines."""
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "code" and course_meta(cell).get("role") == "check":
            parts += [o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream"]
    return "\n".join(parts)


def run_notebook(path: Path, timeout: float = 600) -> nbformat.NotebookNode:
    """Execute a copy of the notebook in its own folder; errors in cells do not stop the run."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return nb


def check_lesson(lesson: str, notebook: Path | None = None) -> int:
    """Print 'N/M exercises passing' and each verdict; exit code 0 only when all pass."""
    from course_utils.cli import _repo_dir

    if len(lesson) == 1:
        lesson = f"0{lesson}"
    path = notebook or find_notebook(lesson, _repo_dir("notebooks"))
    print(f"running {path} ...")
    verdicts = parse_verdicts(check_cell_text(run_notebook(path)))
    exercises = lesson_exercises(lesson)
    passing = sum(verdicts.get(ex.id) == "passed" for ex in exercises)
    print(f"lesson {lesson}: {passing}/{len(exercises)} exercises passing")
    for ex in exercises:
        print(f"  {ex.id} {ex.title}: {verdicts.get(ex.id, 'no verdict (check cell missing or failed)')}")
    return 0 if passing == len(exercises) else 1
