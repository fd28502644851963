"""Fixtures shared by the tests, and the fast lane's guard: a test outside tests/integration
that starts a process fails, naming what it started and how to fix it."""

from __future__ import annotations

import importlib.util
import os
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path

import needs  # tests/ is on sys.path under pytest (no __init__.py: rootdir-relative imports)
import process_guard
import pytest
import torch

from course_utils import processes

# ---------------------------------------------------------------------------- the guard

process_guard.install()
# Matplotlib lists the machine's fonts once (it runs fc-list where fontconfig is installed) and
# keeps the list in its cache folder. On a fresh machine the first fast test that draws a figure
# would start that process and be refused: importing it here makes the list before any test. A
# GPU node's own Python (make test-gpu) may have no matplotlib.
if importlib.util.find_spec("matplotlib"):
    importlib.import_module("matplotlib.font_manager")
# torch.compile compiles in this process, not in a pool of compile workers (PyTorch 2.6 starts
# that pool as processes; the guard would refuse them). Read by inductor when it is imported.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


def _in_integration(path) -> bool:
    return "integration" in Path(str(path)).parts


@pytest.fixture(autouse=True)
def no_processes(request):
    """Refuse any process a fast test starts (tests/process_guard.py); the refusal fails it.

    A test that caught the refusal and passed all the same fails here, at teardown. A test marked
    gpu is not in the fast lane: it runs on a GPU node (`make test-gpu`), against the real
    hardware, DataLoader workers and nvidia-smi included."""
    if _in_integration(request.node.path) or request.node.get_closest_marker("gpu"):
        yield
        return
    with process_guard.guarding(request.node.nodeid) as started:
        yield
    call = getattr(request.node, "guard_call_report", None)
    if started and call is not None and call.passed:
        pytest.fail(started[0], pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep the call's report on the item: `no_processes` fails at teardown only a test that
    passed although it started a process, never one twice."""
    report = yield
    if report.when == "call":
        item.guard_call_report = report
    return report


# ---------------------------------------------------------------------------- injected answers

Answer = str | processes.Finished | Callable[[tuple[str, ...]], processes.Finished]


class FakeCommands:
    """Canned answers for `processes.run`, by command; `calls` lists the commands asked for."""

    def __init__(self, answers: Mapping[str, Answer]):
        self.answers = {tuple(shlex.split(k)): v for k, v in answers.items()}
        self.calls: list[tuple[str, ...]] = []
        self.timeouts: list[float] = []  # each call's time limit, beside `calls`
        self.envs: list[Mapping | None] = []  # each call's environment (None: the caller's)

    @staticmethod
    def matches(key: tuple[str, ...], command: tuple[str, ...]) -> bool:
        """`key`'s program is the command's (by name: `which` may give a full path) and its
        other words appear in the command in order: "git rev-parse" answers
        `git -C /repo rev-parse --short HEAD`."""
        if not command or Path(command[0]).name != key[0]:
            return False
        rest = iter(command[1:])
        return all(word in rest for word in key[1:])

    def __call__(self, command, *, timeout, env=None, cwd=None, merge=False, on_line=None):
        command = tuple(str(c) for c in command)
        self.calls.append(command)
        self.timeouts.append(timeout)
        self.envs.append(env)
        # the longest matching key wins: "nvidia-smi --query-gpu" before "nvidia-smi"
        for key in sorted(self.answers, key=len, reverse=True):
            if self.matches(key, command):
                answer = self.answers[key]
                break
        else:
            known = ", ".join(repr(" ".join(k)) for k in self.answers) or "none"
            pytest.fail(
                f"processes.run({shlex.join(command)!r}) has no canned answer (answers for: "
                f"{known}); pass one to fake_commands",
                pytrace=False,
            )
        if callable(answer):
            answer = answer(command)  # a function's answer is read as any other
        if isinstance(answer, processes.Finished):
            return answer
        if on_line is not None:
            for line in answer.splitlines(keepends=True):
                on_line(line)
        return processes.Finished(command, 0, answer, "", 0.0)


@pytest.fixture
def fake_commands(monkeypatch):
    """Answer `processes.run` as the programs would, without starting them, as `fake_gpus`
    answers for the hardware: `fake_commands({"git rev-parse": "abc1234\\n"})`.

    A key is a program and some of its words ("scontrol show hostnames"); an answer is the
    command's stdout (exit code 0), a `processes.Finished` (a failure, a time-out), or a
    function of the command returning one. A command without an answer fails the test.
    Returns the FakeCommands, whose `calls` lists what was run.
    """

    def install(answers: Mapping[str, Answer]) -> FakeCommands:
        fake = FakeCommands(answers)
        monkeypatch.setattr(processes, "run", fake)
        return fake

    return install


# ---------------------------------------------------------------------------- hardware


@pytest.fixture
def fake_gpus(monkeypatch):
    """Make this process report `n` CUDA GPUs (and no MPS), to test decisions on a CPU machine.

    Only the hardware's answers are faked (torch.cuda.is_available and device_count); code that
    would then touch a GPU still fails, so tests call the deciding functions, not the work.
    """
    monkeypatch.delenv("COURSE_DEVICE", raising=False)

    def install(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        mps = getattr(torch.backends, "mps", None)
        if mps is not None:
            monkeypatch.setattr(mps, "is_available", lambda: False)

    return install


def pytest_collection_modifyitems(items):
    """Tests under tests/integration start processes (launchers, builds, servers, jobs): they
    carry the `integration` marker, so `make test-unit` can leave them out."""
    for item in items:
        if _in_integration(item.path):
            item.add_marker(pytest.mark.integration)


def pytest_runtest_setup(item):
    """The one place that skips a test for missing hardware or system parts (and, in CI, fails
    it where CI installs them): markers gpu, slurm, browser, cpp, ccache, shellcheck, bwrap,
    container."""
    for marker in needs.CHECKS:
        if item.get_closest_marker(marker) is None:
            continue
        reason = needs.problem(marker)
        if reason is None:
            continue
        if marker in needs.CI_MUST_RUN and needs.in_ci():
            pytest.fail(f"CI must run this test: {reason}")
        pytest.skip(reason)


@pytest.fixture
def one_rank_group(tmp_path):
    """A gloo process group of one rank, in this process (a file store: no process, no port)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
