"""`course grade --slurm` from end to end without Slurm or a notebook run: sbatch is answered by
running each task's program in this process (grader/task.py, as slurm/grade_array.sh would on
a node), squeue by "nothing left", and the runner by records as nbval_record writes them. The
real job arrays are in tests/integration/test_grader_slurm.py."""

import csv
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from grading_records import FakeJudge, record, run_of

import course_utils.hpc
from course_utils import processes
from course_utils.cli import main
from course_utils.grading.grader import array, pipeline, task
from course_utils.grading.grader.results import Store, grade_from_json
from course_utils.grading.runner import nbval_runner, sandbox
from course_utils.paths import REPO_ROOT

SOLUTION = REPO_ROOT / "solutions" / "01_tensors.ipynb"
RELEASE = REPO_ROOT / "notebooks" / "01_tensors.ipynb"
CANCELLED = "slurmstepd-cn2: error: *** JOB 82 ON cn2 CANCELLED AT 2026-11-25T21:52:31 ***\n"


class Runner:
    """Each check prints the solution's line, or "not attempted" where the exercise cell is the
    released stub (the held-out cases of a passing check pass); counts the notebooks it ran."""

    def __init__(self):
        solution = nbformat.read(SOLUTION, 4)
        self.texts = {
            c.metadata["course"]["exercise"]: c.outputs[0]["text"]
            for c in solution.cells
            if c.metadata.get("course", {}).get("role") == "check"
        }
        self.runs, self.broken = 0, False
        self.judge = FakeJudge()

    def __call__(
        self, notebook, name, limits, variables=None, sockets=None, announce=None, masked=()
    ):
        self.runs += 1
        if self.broken:
            raise RuntimeError("a bug in the grader")
        records, stub, said = [], {}, {}
        for number, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
            meta = cell.metadata.get("course", {})
            if meta.get("role") == "exercise":
                stub[meta["exercise"]] = "raise NotImplementedError" in cell.source
                records.append(record(number))
            elif meta.get("role") == "check":
                ex_id = meta["exercise"]
                text = f"[{ex_id}] not attempted yet: stub\n" if stub[ex_id] else self.texts[ex_id]
                said[ex_id] = text
                records.append(record(number, text, check=ex_id))
            else:
                records.append(record(number))
        self.judge.said.update(said)
        return run_of(*records)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """A stand-in cluster: `cancel` holds task indexes whose task is cancelled before it runs."""
    monkeypatch.chdir(REPO_ROOT)
    runner = Runner()
    monkeypatch.setattr(nbval_runner, "run_notebook", runner)
    monkeypatch.setattr(pipeline, "judge_beside", runner.judge)
    state = {"cancel": set(), "commands": [], "runner": runner}

    def submit(command):
        state["commands"].append(command)
        manifest = Path(command[-1])
        for index in range(len(json.loads(manifest.read_text())["tasks"])):
            if index in state["cancel"]:  # never ran: only slurmstepd's line in its output
                (manifest.parent / f"task-{index}.out").write_text(CANCELLED)
            else:
                monkeypatch.setenv("SLURMD_NODENAME", f"cn{index % 2 + 1}")
                task.run_task(manifest, index)
        return "81"

    monkeypatch.setattr(array, "submit", submit)
    monkeypatch.setattr(array, "running_tasks", lambda job: {})
    monkeypatch.setattr(
        processes,
        "run",
        lambda cmd, **kw: processes.Finished(tuple(cmd), 1, "", "Invalid job id specified", 0.0),
    )
    return state


def make_class(folder, learners=("ann", "bo", "cy", "di", "ed", "flo")):
    """Half the class submits the solution, the other half the released stubs."""
    for i, name in enumerate(learners):
        (folder / name).mkdir(parents=True)
        source = SOLUTION if i % 2 == 0 else RELEASE
        shutil.copy(source, folder / name / "01_tensors.ipynb")


def gradebook(out):
    with open(out / "gradebook.csv") as f:
        return list(csv.DictReader(f))


def grade(subs, out, *options):
    return main(["grade", str(subs), "--out", str(out), "--no-sandbox", "--seed", "7", *options])


def test_the_array_s_gradebook_equals_a_local_run_s(tmp_path, cluster, capsys):
    make_class(tmp_path / "subs")
    assert grade(tmp_path / "subs", tmp_path / "local", "-j", "2") == 0
    assert (
        grade(
            tmp_path / "subs",
            tmp_path / "array",
            "--slurm",
            "--tasks",
            "3",
            "--sbatch",
            "--partition=debug",
        )
        == 0
    )
    said = capsys.readouterr().out
    assert "job array 81: 3 tasks grade 6 submissions (0 kept from earlier runs)" in said
    local, spread = tmp_path / "local", tmp_path / "array"
    assert (spread / "gradebook.csv").read_text() == (local / "gradebook.csv").read_text()
    for page in sorted((local / "feedback").iterdir()):
        assert (spread / "feedback" / page.name).read_text() == page.read_text()
    assert [r["total"] for r in gradebook(spread)] == ["4", "0", "4", "0", "4", "0"]
    sources = {
        grade_from_json(p.read_text())[1].source for p in Store(spread).folder.glob("*.json")
    }
    assert sources == {str(p) for p in (tmp_path / "subs").glob("*/01_tensors.ipynb")}
    assert {r["seed"] for r in gradebook(spread)} == {"7"}
    [command] = cluster["commands"]
    assert command[:3] == ["sbatch", "--parsable", "--array=0-2"]
    assert "--partition=debug" in command and command[-2].endswith("slurm/grade_array.sh")


def test_a_second_run_grades_only_what_a_cancelled_task_left(tmp_path, cluster, capsys):
    make_class(tmp_path / "subs")
    out = tmp_path / "out"
    cluster["cancel"] = {1}
    assert grade(tmp_path / "subs", out, "--slurm", "--tasks", "3") == 1
    first = capsys.readouterr()
    assert (
        "task 1 on cn2: cancelled: it was cancelled (scancel); 2 submissions without a "
        "result: " in first.err
    )
    assert "2 submissions have no result yet: run the same command again" in first.err
    assert len(gradebook(out)) == 4 and cluster["runner"].runs == 4
    cluster["cancel"] = set()
    assert grade(tmp_path / "subs", out, "--slurm", "--tasks", "3") == 0
    second = capsys.readouterr().out
    assert "job array 81: 2 tasks grade 2 submissions (4 kept from earlier runs)" in second
    assert cluster["runner"].runs == 6 and len(gradebook(out)) == 6
    assert grade(tmp_path / "subs", out, "--slurm") == 0  # nothing left: no job at all
    assert "every submission already has its result (6): nothing to grade" in (
        capsys.readouterr().out
    )
    assert cluster["runner"].runs == 6 and len(cluster["commands"]) == 2


def test_a_changed_submission_is_graded_again_and_an_unchanged_one_is_not(tmp_path, cluster):
    make_class(tmp_path / "subs", ("ann", "bo"))
    out = tmp_path / "out"
    assert grade(tmp_path / "subs", out, "--slurm") == 0
    shutil.copy(SOLUTION, tmp_path / "subs" / "bo" / "01_tensors.ipynb")  # bo finished it
    assert grade(tmp_path / "subs", out, "--slurm") == 0
    assert cluster["runner"].runs == 3
    assert [(r["learner"], r["total"]) for r in gradebook(out)] == [("ann", "4"), ("bo", "4")]
    assert grade(tmp_path / "subs", out, "--slurm", "--timeout", "300") == 0  # other limits
    assert cluster["runner"].runs == 5


def test_a_node_that_cannot_sandbox_fails_its_task_with_the_reason(
    tmp_path, cluster, monkeypatch, capsys
):
    make_class(tmp_path / "subs", ("ann", "bo"))
    monkeypatch.setattr(
        sandbox, "problem", lambda max_procs, **kw: "bubblewrap (bwrap) is not found"
    )
    argv = [
        "grade",
        str(tmp_path / "subs"),
        "--out",
        str(tmp_path / "out"),
        "--slurm",
        "--max-procs",
        "0",
    ]
    assert main(argv) == 1
    said = capsys.readouterr()
    assert cluster["runner"].runs == 0  # nothing was graded unsandboxed
    assert (
        "task 0 on cn1 graded nothing: cannot grade in a sandbox: bubblewrap (bwrap) is "
        "not found" in said.err
    )
    assert "task 0 on cn1: refused: cannot grade in a sandbox: bubblewrap" in said.err
    assert gradebook(tmp_path / "out") == []


def test_cluster_options_need_slurm_and_sbatch_options_are_checked(tmp_path, capsys):
    make_class(tmp_path / "subs", ("ann",))
    base = ["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--no-sandbox"]
    assert main([*base, "--tasks", "4"]) == 2
    assert "--tasks 4: --tasks and sbatch options go with --slurm; add --slurm" in (
        capsys.readouterr().err
    )
    assert main([*base, "--slurm", "--sbatch", "--array=0-3"]) == 2
    assert "`course grade --slurm` sets --array itself" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_lms_export_is_written_beside_the_gradebook(tmp_path, cluster, capsys):
    make_class(tmp_path / "subs", ("ann", "bo"))
    assert grade(tmp_path / "subs", tmp_path / "out", "--lms", "canvas") == 0
    text = (tmp_path / "out" / "canvas.csv").read_text().splitlines()
    assert text[0] == "Student,ID,SIS User ID,SIS Login ID,Section,Lesson 01"
    assert text[2:] == ["ann,,,ann,,4", "bo,,,bo,,0"]
    assert "canvas import file" in capsys.readouterr().out


def test_a_result_where_the_grader_failed_is_shown_and_graded_again(tmp_path, cluster, capsys):
    make_class(tmp_path / "subs", ("ann",))
    out = tmp_path / "out"
    cluster["runner"].broken = True
    assert grade(tmp_path / "subs", out, "--slurm") == 1
    [row] = gradebook(out)
    assert (row["status"], row["reason"]) == (
        "error",
        "the grader failed: RuntimeError: a bug in the grader",
    )
    cluster["runner"].broken = False
    assert grade(tmp_path / "subs", out, "--slurm") == 0
    assert [(r["status"], r["total"]) for r in gradebook(out)] == [("ok", "4")]
    assert "1 tasks grade 1 submissions (0 kept" in capsys.readouterr().out


def test_a_task_finds_its_index_in_slurm_s_variable(monkeypatch):
    seen = []
    monkeypatch.setattr(task, "run_task", lambda manifest, index: seen.append((manifest, index)))
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    task.main(["/x/manifest.json"])
    task.main(["/x/manifest.json", "--index", "0"])
    assert seen == [(Path("/x/manifest.json"), 2), (Path("/x/manifest.json"), 0)]
    monkeypatch.setattr(course_utils.hpc, "allocated_cpus", lambda: 8)
    assert (task.jobs_here(None), task.jobs_here(3)) == (4, 3)
