"""Hostile submissions of lesson 10, graded in the sandbox as `course grade` grades them: the forged
evidence a learner's kernel can produce, for the lab's "run" exercises (10.1, 10.2; 10.3 and 10.4
are decisions on data, left as stubs here). None may earn a point without a flag (the solution's
4/4 is tests/integration/test_grader_lab.py's).

- printed lines: every exercise left a stub, the cells print what the runs and the checks would
  print ("record 2x2: ...", "[10.2] passed: ..."), and the script's ranks print the usage line
  and exit before training (`--help`): the judge reads runs, not lines;
- typed in: a staging function that unpacks nothing, with the staging step's results written by
  hand (the data set's digest and the function's own), and a script whose ranks never train
  with the study's records and a 2-node log written by hand: the judge runs the function in its
  own processes and the script's study in a folder of its own, and reads neither file;
- a run in the kernel: the lab's program called in the kernel once per shape (world size 1,
  each named for a shape), the sweep too, and a 2-node log written by hand, beside a script
  whose ranks never train: flagged, and the check's own study of the script writes no record.
"""

from __future__ import annotations

import csv
import textwrap

import nbformat
import pytest

from course_utils.cli import main
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]
RELEASE = REPO_ROOT / "notebooks" / "10_cluster_lab.ipynb"
SOLUTION = REPO_ROOT / "solutions" / "10_cluster_lab.ipynb"

PRINTED = {
    "10.1": """
        def stage_dataset(archive, environ):
            raise NotImplementedError("Exercise 10.1")

        for rank in range(4):
            print(f"rank {rank} on node{rank // 2}: copied 512 files in /tmp/lab/node{rank // 2}")
        print("[10.1] passed: your function staged the lab's data set once per node")
        """,
    "10.2": """
        def scaling_script():
            return SCRIPT.replace('lab_train "$@"', 'lab_train "$@" --help')

        study = cluster.study(launcher, scaling_script, RUNS / "data", RUNS / "records")
        for name in ("1x1", "1x2", "1x4", "2x2"):
            print(f"record {name}: 2,000 images/s, written to runs/10/records/{name}.json")
        print("[10.2] passed: your script ran the four shapes and a sweep of 3 learning rates")
        """,
}

TYPED = {
    "10.1": """
        import json, tempfile
        from course_utils import notebook_code
        from course_utils.lab import small_files

        def stage_dataset(archive, environ):
            return tempfile.mkdtemp()  # unpacks nothing

        for rank in range(4):
            node = f"node{rank // 2}"
            result = {"rank": rank, "node": node, "path": f"/tmp/lab/{node}",
                      "copied": rank % 2 == 0,
                      "answer": notebook_code.digest(notebook_code.source(stage_dataset)),
                      "digest": small_files.content_digest(), "seconds": 0.1,
                      "world_size": 4, "ranks_on_node": 2}
            (RUNS / "staging").mkdir(parents=True, exist_ok=True)
            (RUNS / "staging" / f"rank{rank}.json").write_text(json.dumps(result))
        """,
    "10.2": """
        import json

        def scaling_script():
            return SCRIPT.replace('lab_train "$@"', 'lab_train "$@" --help')

        digest = cluster.digest(scaling_script())
        shapes = {"1x1": (1, 1), "1x2": (1, 2), "1x4": (1, 4), "2x2": (2, 2)}
        runs = [(name, "scaling", 0.05, shape) for name, shape in shapes.items()]
        runs += [(f"lr-{lr:g}", "sweep", lr, (1, 1)) for lr in (0.02, 0.1, 0.3)]
        for name, kind, lr, (nodes, per_node) in runs:
            names = [f"node{n}" for n in range(nodes)]
            record = {
                "record": "course-lab-run", "schema": 1, "study": kind, "name": name,
                "label": {"machine": "m", "launcher": "local", "date": "2026-11-26",
                          "commit": "abc1234", "torch": "2.14.1", "job": None, "script": digest},
                "configuration": {"nodes": nodes, "ranks": nodes * per_node,
                                  "ranks_per_node": per_node, "threads_per_rank": 1,
                                  "cpus_per_task": 1, "batch_per_rank": 32, "steps": 8 if
                                  kind == "scaling" else 40, "lr": lr, "device": "cpu"},
                "node_names": names, "backend": "gloo",
                "throughput": 800.0 * nodes * per_node, "step_time": 0.04,
                "communication_share": 0.1, "utilisation": {"cpu_percent": 90.0},
                "energy": {"joules": None, "source": "not reported", "scope": "typed"},
                "staging": {"copies": dict.fromkeys(names, 1)},
                "loss": {"first": 2.3, "last": 2.0 - lr}, "losses": [2.31, 2.3, 2.29, 2.28, 2.27],
            }
            folder = RUNS / "records" / kind
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.json").write_text(json.dumps(record))
        (RUNS / "records" / "logs").mkdir(parents=True, exist_ok=True)
        (RUNS / "records" / "logs" / "2x2.log").write_text(
            "gloo INFO rank 0 -> rank 2 via TCP/lo 127.0.0.1:1 -> 127.0.0.1:2\\n"
            "record 2x2: 3,200 images/s, 4 ranks on 2 node(s)\\n")
        """,
}

KERNEL = {
    "10.2": """
        import os
        from course_utils.jobs import lab_train

        def scaling_script():
            return SCRIPT.replace('lab_train "$@"', 'lab_train "$@" --help')

        os.environ["COURSE_LAB_SCRIPT"] = cluster.digest(scaling_script())
        data, out = str(RUNS / "data"), str(RUNS / "records")
        for name in ("1x1", "1x2", "1x4", "2x2"):
            lab_train.main(["--data", data, "--out", out, "--name", name, "--threads", "1"])
        for i in range(3):
            lab_train.main(["--data", data, "--out", out, "--lrs", "0.02,0.1,0.3",
                            "--index", str(i), "--steps", "40", "--threads", "1"])
        (RUNS / "records" / "logs").mkdir(parents=True, exist_ok=True)
        (RUNS / "records" / "logs" / "2x2.log").write_text(
            "gloo INFO rank 0 -> rank 2 via TCP/lo 127.0.0.1:1 -> 127.0.0.1:2\\n"
            "record 2x2: 3,200 images/s, 4 ranks on 2 node(s)\\n")
        """,
}


def _solution_sources() -> dict[str, str]:
    nb = nbformat.read(SOLUTION, as_version=4)
    return {
        course_meta(c)["exercise"]: c.source
        for c in nb.cells
        if course_meta(c).get("role") == "exercise"
    }


def _script() -> str:
    """The solution's batch script, as a line the attacks' cells start with."""
    source = _solution_sources()["10.2"]
    text = source.split('return """\\\n', 1)[1].split('"""', 1)[0]
    return f"SCRIPT = {text!r}\n"


def submission(attacks: dict[str, str], honest=()) -> nbformat.NotebookNode:
    """The released notebook with these exercise cells; `honest` ones keep the solution's."""
    nb = nbformat.read(RELEASE, as_version=4)
    solution = _solution_sources()
    for cell in nb.cells:
        exercise = course_meta(cell).get("exercise")
        if course_meta(cell).get("role") != "exercise":
            continue
        if exercise in attacks:
            cell.source = _script() + textwrap.dedent(attacks[exercise])
        elif exercise in honest:
            cell.source = solution[exercise]
    return nb


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory):
    subs = tmp_path_factory.mktemp("subs")
    for name, attacks in {"printed": PRINTED, "typed": TYPED, "kernel": KERNEL}.items():
        nbformat.write(submission(attacks), subs / f"{name}__{RELEASE.name}")
    out = tmp_path_factory.mktemp("out")
    assert main(["grade", str(subs), "--out", str(out), "--seed", "10", "-j", "1"]) == 0
    with open(out / "gradebook.csv", newline="") as f:
        return {row["learner"]: row for row in csv.DictReader(f)}


def test_no_forged_run_earns_a_point_without_a_flag(gradebook):
    for learner, row in gradebook.items():
        points = {e: row[e] for e in ("10.1", "10.2")}
        unflagged = [e for e, p in points.items() if p != "0" and e not in row["flags"]]
        assert unflagged == [], (learner, points, row["flags"], row["reason"])


def test_each_forgery_earns_nothing(gradebook):
    assert {learner: row["total"] for learner, row in gradebook.items()} == {
        "printed": "0",
        "typed": "0",
        "kernel": "0",
    }
    assert "10.2: calls the course's own answer" in gradebook["kernel"]["flags"]
    assert "10.2: opens or removes files" in gradebook["typed"]["flags"]
