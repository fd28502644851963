"""The fast lane's guard (tests/process_guard.py) and `fake_commands` (tests/conftest.py).

Each start below is refused before a process exists; should the guard ever be off, the
children exit at once (`true`, `os._exit`) and the test fails with "DID NOT RAISE"."""

import os
import subprocess

import process_guard
import pytest
import torch

from course_utils import processes

REFUSED = pytest.fail.Exception  # what the guard raises, a BaseException


def _refused(request, what: str) -> str:
    return (
        rf"{request.node.nodeid} started a process \({what}\); the fast lane .* starts none\. "
        r"Either move the test to tests/integration/, or inject the answer: the `fake_commands`"
    )


def test_the_guard_is_on_for_this_test(request):
    assert process_guard.STATE["test"] == request.node.nodeid


def test_subprocess_and_processes_run_are_refused_and_named(request):
    with pytest.raises(REFUSED, match=_refused(request, "subprocess.Popen: true --version")):
        subprocess.run(["true", "--version"])
    with pytest.raises(REFUSED, match=_refused(request, "subprocess.Popen: git rev-parse HEAD")):
        processes.run(["git", "rev-parse", "HEAD"], timeout=10)
    assert len(process_guard.STATE["started"]) == 2
    process_guard.forgive()  # provoked on purpose: not a failure of this test


def test_fork_system_and_spawn_are_refused(request):
    with pytest.raises(REFUSED, match=_refused(request, "os.fork: os.fork")):
        if os.fork() == 0:
            os._exit(0)
    with pytest.raises(REFUSED, match=_refused(request, "os.system: true")):
        os.system("true")
    with pytest.raises(REFUSED, match=_refused(request, "os.posix_spawn: true")):
        os.posix_spawnp("true", ["true"], os.environ)
    process_guard.forgive()


def test_dataloader_workers_are_refused(request):
    data = torch.utils.data.TensorDataset(torch.zeros(4, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=2, num_workers=1)
    with pytest.raises(REFUSED, match=_refused(request, "os.fork: os.fork")):
        next(iter(loader))
    process_guard.forgive()
    assert len(list(torch.utils.data.DataLoader(data, batch_size=2))) == 2  # num_workers=0


def test_a_swallowed_refusal_is_still_recorded(request):
    try:
        subprocess.run(["true"])
    except BaseException:  # what a careless `except BaseException` probe would do
        pass
    assert process_guard.STATE["started"][0].startswith(f"{request.node.nodeid} started")
    process_guard.forgive()  # else `no_processes` fails this test at teardown


def test_fake_commands_answer_by_program_and_words(fake_commands):
    fake = fake_commands(
        {"scontrol show hostnames": "cn1\ncn2\n", "nvidia-smi": "0\n", "git rev-parse": "abc\n"}
    )
    done = processes.run(["/usr/bin/scontrol", "show", "hostnames", "cn[1-2]"], timeout=10)
    assert (done.ok, done.stdout.split()) == (True, ["cn1", "cn2"])
    assert processes.run(["git", "-C", "/repo", "rev-parse", "HEAD"], timeout=5).stdout == "abc\n"
    lines = []
    processes.run(["nvidia-smi", "-L"], timeout=5, on_line=lines.append)
    assert lines == ["0\n"] and fake.timeouts == [10, 5, 5]
    assert fake.calls[0] == ("/usr/bin/scontrol", "show", "hostnames", "cn[1-2]")


def test_fake_commands_refuse_a_command_without_an_answer(fake_commands):
    fake_commands({"git rev-parse": "abc\n", "scontrol show hostnames": "cn1\n"})
    with pytest.raises(REFUSED, match=r"processes.run\('git status'\) has no canned answer"):
        processes.run(["git", "status"], timeout=5)
    with pytest.raises(REFUSED, match="has no canned answer"):  # its words out of order
        processes.run(["scontrol", "hostnames", "show"], timeout=5)
