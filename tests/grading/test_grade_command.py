"""grader/command: `course grade`'s options, its refusals, and a whole run with the runner
replaced (records as nbval_record writes them; no notebook runs, no sandbox starts)."""

import csv
import re
import signal

import nbformat
import pytest
from grading_records import FakeJudge, record, run_of

from course_utils.cli import build_parser, main
from course_utils.grading.grader import command, pipeline
from course_utils.grading.runner import nbval_runner, sandbox
from course_utils.paths import REPO_ROOT

SOLUTION = REPO_ROOT / "solutions" / "01_tensors.ipynb"
RELEASE = REPO_ROOT / "notebooks" / "01_tensors.ipynb"


def args(*options):
    return build_parser().parse_args(["grade", "subs", *options])


def test_limits_from_the_command_line(monkeypatch):
    import course_utils.hpc

    monkeypatch.setattr(course_utils.hpc, "allocated_cpus", lambda: 4)
    limits = command.limits_from_args(
        args("--max-memory", "6G", "--max-disk", "256M", "--cpu-time", "30", "-j", "2")
    )
    assert (limits.sandbox, limits.max_procs, limits.max_memory) == (True, 512, 6 * 2**30)
    assert (limits.max_disk, limits.cpu_time, limits.max_file_size) == (2**28, 30, 2**30)
    assert (limits.timeout, limits.cell_timeout, limits.threads) == (600, 120, 2)
    assert command.limits_from_args(args("--no-sandbox")).describe() == "none"
    assert command.limits_from_args(args("--timeout", "40")).cell_timeout == 40
    assert command.limits_from_args(args("--max-procs", "0", "--max-memory", "0")).max_memory == 0


@pytest.mark.parametrize(
    "wrong, says",
    [
        (["--max-memory", "lots"], "--max-memory 'lots': give a size such as 8G"),
        (["--max-file-size", "1X"], "--max-file-size '1X': give a size such as 8G"),
        (["--max-procs", "-1"], "--max-procs -1: give a positive number, or 0 for no limit"),
        (["--cpu-time", "-5"], "--cpu-time -5: give a positive number, or 0 for no limit"),
        (["--max-disk", "0"], "--max-disk 0: the sandbox needs some writable space"),
    ],
)
def test_limits_from_args_names_the_option_and_the_fix(wrong, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        command.limits_from_args(args(*wrong))


def test_check_sandbox_refuses_with_the_reason(monkeypatch, tmp_path):
    limits = command.limits_from_args(args())
    monkeypatch.setattr(
        sandbox, "problem", lambda max_procs, **kw: "bwrap is not found on PATH: fix"
    )
    with pytest.raises(ValueError, match="cannot grade in a sandbox: bwrap is not found"):
        command.check_sandbox(limits, [tmp_path])
    monkeypatch.setattr(sandbox, "problem", lambda max_procs, **kw: None)
    command.check_sandbox(limits, [tmp_path])  # nothing in the way
    visible, _ = sandbox.visible_paths()
    with pytest.raises(ValueError, match="it must stay hidden"):
        command.check_sandbox(limits, [visible[0]])
    command.check_sandbox(command.limits_from_args(args("--no-sandbox")), [visible[0]])


JUDGE = FakeJudge()


def fake_runner(notebook, name, limits, variables=None, sockets=None, announce=None, masked=()):
    """Every cell ran; each check printed its solution's verdict, but 01.3's said failed; the
    judge (JUDGE) decided as they printed, the held-out cases of the passing checks passed."""
    records = []
    solution = nbformat.read(SOLUTION, 4)
    texts = {
        c.metadata["course"]["exercise"]: c.outputs[0]["text"]
        for c in solution.cells
        if c.cell_type == "code" and c.metadata.get("course", {}).get("role") == "check"
    }
    texts["01.3"] = "[01.3] failed: expected a view, got a copy\n"
    for number, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
        ex_id = cell.metadata.get("course", {}).get("exercise")
        if cell.metadata.get("course", {}).get("role") == "check":
            records.append(record(number, texts[ex_id], check=ex_id))
        else:
            records.append(record(number))
    JUDGE.said.update(texts)
    return run_of(*records)


def test_a_whole_grading_run_writes_every_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(nbval_runner, "run_notebook", fake_runner)
    monkeypatch.setattr(pipeline, "judge_beside", JUDGE)
    monkeypatch.chdir(REPO_ROOT)
    subs = tmp_path / "subs"
    (subs / "ann").mkdir(parents=True)
    (subs / "ann" / "01_tensors.ipynb").write_text(SOLUTION.read_text())
    (subs / "bo__01_tensors.ipynb").write_text("not json")
    (subs / "stray.ipynb").write_text("{}")
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "out"
    code = main(["grade", str(subs), "--out", str(out), "--no-sandbox", "--lesson", "1"])
    said = capsys.readouterr()
    assert code == 0
    assert signal.getsignal(signal.SIGTERM) == before  # scancel's handler was only for the run
    assert f"skipped {subs / 'stray.ipynb'}: name it" in said.err
    assert "--no-sandbox: learners' code runs with your rights" in said.err
    assert "graded 2 submissions in" in said.out and "sandbox: none" in said.out
    with open(out / "gradebook.csv") as f:
        rows = {r["learner"]: r for r in csv.DictReader(f)}
    assert (rows["ann"]["total"], rows["ann"]["01.3"], rows["ann"]["status"]) == ("3", "0", "ok")
    assert (rows["bo"]["total"], rows["bo"]["status"]) == ("0", "unreadable")
    assert sorted(p.name for p in out.iterdir()) == [
        "feedback",
        "gradebook.csv",
        "junit.xml",
        "logs",
    ]
    assert "expected a view, got a copy" in (out / "feedback" / "ann.md").read_text()
    assert (out / "logs" / "ann__01.log").exists()


@pytest.mark.parametrize(
    "options, says",
    [
        (["--lesson", "one"], "--lesson 'one': give a lesson number, e.g. --lesson 01"),
        (["--lesson", "07"], "no submissions found in {subs} for lesson 07; expected"),
        (["-j", "0"], "-j 0 / --timeout 600: both must be positive"),
        (["--max-procs", "-2"], "--max-procs -2: give a positive number"),
    ],
)
def test_course_grade_refuses_before_grading(tmp_path, monkeypatch, capsys, options, says):
    monkeypatch.chdir(REPO_ROOT)
    subs = tmp_path / "subs"
    (subs / "ann").mkdir(parents=True)
    (subs / "ann" / "01_tensors.ipynb").write_text(SOLUTION.read_text())
    out = tmp_path / "out"
    assert main(["grade", str(subs), "--out", str(out), "--no-sandbox", *options]) == 2
    assert capsys.readouterr().err.startswith(f"course grade: {says.format(subs=subs)}")
    assert not out.exists()
