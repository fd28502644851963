"""runner: the run's command line and environment, its record (written and read), the kernel
watch and the bookkeeping of running runs, without starting a run
(tests/integration/test_nbval_runner.py and test_sandbox_runs.py start real ones)."""

import json
from pathlib import Path
from queue import Empty
from types import SimpleNamespace

import pytest
from grading_records import record

from course_utils.grading.runner import (
    commands,
    kernel_watch,
    leftovers,
    nbval_record,
    sandbox,
)
from course_utils.grading.runner.limits import Limits
from course_utils.grading.runner.nbval_runner import MAX_RECORD_BYTES, read_records
from course_utils.paths import REPO_ROOT


def option(argv, name):
    return argv[argv.index(name) + 1]


def test_a_run_as_the_grader_s_user_lives_in_the_notebook_s_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("INSTRUCTOR_SETTING", "kept")
    notebook = tmp_path / "home" / "01_grading.ipynb"
    notebook.parent.mkdir()
    limits = Limits(cell_timeout=7.5, threads=3, sandbox=False)
    variables = {"SOME_SETTING": "7", "HOME": "/elsewhere"}
    sockets = {"COURSE_JUDGE": tmp_path / "judge.sock"}
    argv, env = commands.command(notebook, limits, tmp_path / "run", "tok", variables, sockets)
    assert argv[-1] == str(notebook) and "bwrap" not in argv[0]
    assert env["SOME_SETTING"] == "7"
    assert env["COURSE_JUDGE"] == str(tmp_path / "judge.sock")  # the judge's door, as it is
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-p"] == [
        "course_utils.grading.runner.nbval_record",
        "course_utils.grading.runner.kernel_watch",
        "course_utils.grading.runner.announce",
        "no:cacheprovider",
    ]
    assert "--nbval-cell-timeout=7.5" in argv and "--nbval" in argv
    assert option(argv, "--course-record") == str(tmp_path / "run" / "cells.jsonl")
    assert option(argv, "-c") == str(tmp_path / "run" / "pytest.ini")
    assert (env["HOME"], env["TMPDIR"]) == (str(notebook.parent), str(notebook.parent / "tmp"))
    assert (notebook.parent / "tmp").is_dir()
    assert env["COURSE_BUILD_DIR"] == str(notebook.parent / "build")  # never shared between runs
    assert (env[sandbox.TOKEN], env["OMP_NUM_THREADS"], env["INSTRUCTOR_SETTING"]) == (
        "tok",
        "3",
        "kept",
    )


def test_a_sandboxed_run_sees_its_notebook_and_writes_only_its_record(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: "/opt/bwrap")
    notebook = tmp_path / "home" / "01_grading.ipynb"
    limits = Limits(max_procs=64, max_memory=2**30, max_file_size=2**20, cpu_time=9)
    variables = {"SOME_SETTING": "7", "HOME": "/elsewhere"}
    sockets = {"COURSE_JUDGE": tmp_path / "judge" / "judge.sock"}
    argv, env = commands.command(notebook, limits, tmp_path, "tok", variables, sockets)
    assert argv[0] == "/opt/bwrap"
    binds = [tuple(argv[i + 1 : i + 3]) for i, a in enumerate(argv) if a == "--ro-bind"]
    assert (str(notebook), "/tmp/grading/01_grading.ipynb") in binds
    assert (str(tmp_path / "pytest.ini"), "/run/course/pytest.ini") in binds
    assert (str(tmp_path / "passwd"), "/etc/passwd") in binds
    # the judge's socket, in a folder of its own, is the run's one door out: it can connect
    # there, but neither remove nor replace the socket
    assert (str(tmp_path / "judge"), "/run/course/course_judge") in binds
    assert (str(REPO_ROOT / "cpp"),) * 2 in binds  # the C++ sources, read-only, at their place
    writes = [tuple(argv[i + 1 : i + 3]) for i, a in enumerate(argv) if a == "--bind"]
    assert writes == [(str(tmp_path / "cells.jsonl"), "/run/course/cells.jsonl")]
    set_inside = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
    assert set_inside["COURSE_JUDGE"] == "/run/course/course_judge/judge.sock"
    assert set_inside["SOME_SETTING"] == "7"  # the caller's variables go in,
    assert set_inside["HOME"] == "/tmp/grading"  # but never over the sandbox's own
    inside = argv[argv.index("--") + 1 :]
    assert inside[1:6] == [
        "--core=0",
        "--nproc=64",
        "--as=1073741824",
        "--fsize=1048576",
        "--cpu=9",
    ]
    assert inside[-1] == "/tmp/grading/01_grading.ipynb"
    assert option(inside, "--course-record") == "/run/course/cells.jsonl"
    assert env[sandbox.TOKEN] == "tok"  # bwrap itself carries the token: found and ended too


def test_the_record_plugin_writes_one_line_per_cell(tmp_path):
    path = tmp_path / "cells.jsonl"
    config = SimpleNamespace(getoption=lambda name: str(path))
    item = SimpleNamespace(
        config=config,
        cell_num=3,
        test_outputs=[{"output_type": "stream", "name": "stdout", "text": "[01.1] passed: ok\n"}],
        cell={"metadata": {}},
        parent=SimpleNamespace(kernel=SimpleNamespace()),
    )
    for when in ("setup", "call", "teardown"):
        hook = nbval_record.pytest_runtest_makereport(
            item, SimpleNamespace(when=when, excinfo=None, duration=0.5)
        )
        next(hook)
        with pytest.raises(StopIteration):
            hook.send(None)
    [line] = path.read_text().splitlines()
    assert json.loads(line) == {
        "cell": 3,
        "ok": True,
        "problem": "",
        "ename": "",
        "evalue": "",
        "stdout": "[01.1] passed: ok\n",
        "stderr": "",
        "outputs": [],  # not a check cell: its outputs are not compared, so not kept
        "died": False,
        "timed_out": False,
        "seconds": 0.5,
    }


def test_a_record_keeps_a_check_cell_s_outputs_and_clips_floods():
    rec = record(6, "x" * 10_000 + "[01.1] passed: ok\n", check="01.1")
    assert rec["stdout"].endswith("[01.1] passed: ok\n") and "characters cut" in rec["stdout"]
    assert (
        rec["outputs"][0]["text"].startswith("x" * 100)
        and "characters cut" in (rec["outputs"][0]["text"])
    )
    assert len(json.dumps(rec)) < 10_000
    died = record(4, died=True)
    assert died["died"] and not died["timed_out"] and not died["ok"]


def test_read_records_passes_over_what_is_not_a_record(tmp_path):
    path = tmp_path / "cells.jsonl"
    lines = [json.dumps(record(0)), "not json", json.dumps({"no": "cell"}), json.dumps(record(2))]
    path.write_text("\n".join(lines) + '\n{"cell": 5, "ok": tr')  # cut off mid-line by a kill
    assert sorted(read_records(path)) == [0, 2]
    assert read_records(tmp_path / "missing.jsonl") == {}
    path.write_text(
        json.dumps(record(0)) + "\n" + "y" * MAX_RECORD_BYTES + "\n" + json.dumps(record(1))
    )
    assert sorted(read_records(path)) == [0]  # a flood stops the reading, not the grader


class FakeKernel:
    """nbval's RunningKernel as the watch sees it: replies never come; alive until told."""

    def __init__(self, alive=True, code=-11):
        self.alive = alive
        process = SimpleNamespace(poll=lambda: None if alive else code)
        self.km = SimpleNamespace(provisioner=SimpleNamespace(process=process))

    def await_reply(self, msg_id, timeout=None):
        raise Empty

    def is_alive(self):
        return self.alive


def test_the_kernel_watch_fails_a_cell_whose_kernel_died(monkeypatch):
    monkeypatch.setattr(kernel_watch, "SLICE", 0.01)

    class Kernel(FakeKernel):
        pass

    kernel_watch.watch(Kernel)
    patched = Kernel.await_reply
    kernel_watch.watch(Kernel)  # idempotent: the plugin may be loaded twice
    assert Kernel.await_reply is patched
    dead = Kernel(alive=False)
    with pytest.raises(kernel_watch.KernelDied, match=r"died while running this cell \(signal 11"):
        dead.await_reply("id", timeout=5)
    assert dead.course_died
    with pytest.raises(Empty):  # alive: nbval's own time limit, as before
        Kernel().await_reply("id", timeout=0.03)
    assert kernel_watch.exit_status(Kernel(alive=True)) == "an unknown status"


def test_a_tracked_run_is_ended_by_kill_running(monkeypatch):
    ended, trees = [], []
    monkeypatch.setattr(leftovers, "kill_marked", lambda proc, token, group: ended.append(token))
    monkeypatch.setattr(leftovers.processes, "end_tree", trees.append)
    proc = SimpleNamespace(pid=-42)
    with leftovers.tracked(proc, "tok"):
        leftovers.kill_running()
        assert ended == ["tok"] and trees == [proc]
    assert ended == ["tok", "tok"]  # and once more when the run ends
    leftovers.kill_running()
    assert trees == [proc]  # no longer running


def test_kill_marked_finds_nothing_of_a_token_nobody_carries():
    proc = SimpleNamespace(pid=2**22 + 7)  # above any pid this machine hands out
    killed = []
    group = SimpleNamespace(kill_all=lambda: killed.append("group"))
    leftovers.kill_marked(proc, "no-process-carries-this-token", group)
    assert killed == ["group"]


def test_the_plugin_names_are_the_runner_s_modules():
    for name in commands.PLUGINS:
        module = __import__(name, fromlist=["x"])
        assert Path(module.__file__).parent.name == "runner"
