"""course_utils.failing.stacks: reading py-spy dumps (taking them is in tests/integration)."""

from course_utils.failing import stacks

DUMP = """Process 16896: /venv/bin/python -u -m course_utils.jobs.faulty_ddp --fault hang
Python v3.11.7 (/usr/bin/python3.11)

Thread 16897 (idle): "pt_main_thread"
    run (threading.py:982)
Thread 16896 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:3913)
    wrapper (torch/distributed/c10d_logger.py:83)
    average_gradients (course_utils/jobs/faulty_ddp.py:78)
    <module> (course_utils/jobs/faulty_ddp.py:127)
"""


def test_frames_are_the_main_threads_innermost_first():
    assert stacks.frames(DUMP) == ["all_reduce", "wrapper", "average_gradients", "<module>"]
    assert stacks.frames("") == []


def test_rank_of_reads_the_launchers_variables(monkeypatch):
    class Fake:
        def __init__(self, environ):
            self._environ = environ

        def environ(self):
            return self._environ

    assert stacks.rank_of(Fake({"RANK": "3", "SLURM_PROCID": "0"})) == 3  # torchrun's first
    assert stacks.rank_of(Fake({"SLURM_PROCID": "2"})) == 2
    assert stacks.rank_of(Fake({})) is None


class Pid:
    def __init__(self, pid):
        self.pid = pid


def _stuck_ranks(monkeypatch):
    """Two ranks whose every dump shows the same stack: found within 3 looks, unless a check
    stops the looking first."""
    monkeypatch.setattr(stacks, "_ranks_running", lambda marker: {0: Pid(1), 1: Pid(2)})
    monkeypatch.setattr(stacks, "py_spy_dump", lambda pid: DUMP)


def test_no_stacks_without_py_spy(monkeypatch):
    _stuck_ranks(monkeypatch)
    monkeypatch.setattr(stacks, "py_spy", lambda: None)
    assert stacks.stacks_of_stuck_ranks("marker", nproc=2, limit=60, interval=0) == {}


def test_looking_stops_when_asked(monkeypatch):
    import threading

    _stuck_ranks(monkeypatch)
    stop = threading.Event()
    stop.set()
    monkeypatch.setattr(stacks, "py_spy", lambda: "/usr/bin/py-spy")
    assert stacks.stacks_of_stuck_ranks("marker", nproc=2, limit=60, stop=stop, interval=0) == {}


def test_looking_finds_ranks_stuck_in_the_same_stack(monkeypatch):
    _stuck_ranks(monkeypatch)
    monkeypatch.setattr(stacks, "py_spy", lambda: "/usr/bin/py-spy")
    assert stacks.stacks_of_stuck_ranks("marker", nproc=2, limit=60, interval=0) == {
        0: DUMP,
        1: DUMP,
    }


def test_looking_gives_up_when_py_spy_keeps_failing(monkeypatch):
    monkeypatch.setattr(stacks, "py_spy", lambda: "/usr/bin/py-spy")
    monkeypatch.setattr(stacks, "_ranks_running", lambda marker: {0: Pid(1), 1: Pid(2)})
    calls = []

    def denied(pid):
        calls.append(pid)
        raise RuntimeError("Permission denied")

    monkeypatch.setattr(stacks, "py_spy_dump", denied)
    assert stacks.stacks_of_stuck_ranks("marker", nproc=2, limit=60, interval=0) == {}
    assert len(calls) == 10  # gave up after 10 failed looks, not at the 60 s limit
