"""`course grade` against honest and adversarial submissions, all generated from lesson 01.

One `course grade -j 2` run grades every submission in the sandbox (module-scoped fixture); the
tests then read its gradebook, feedback and JUnit report, and look at the machine around it:
files planted where no submission may reach, a TCP server on 127.0.0.1, the processes left.
Each attempt to escape sits in an exercise cell after the exercise's solution and makes the
exercise fail when it works, so the gradebook says which attempts failed. Small limits keep the
run bounded (60 s per notebook, 10 s per cell, 64 processes, 6 GiB of address space, 64 MiB per
file, 256 MiB of disk). The rules behind each verdict are tested without a run in
tests/grading/ (test_verdicts, test_plan, test_submissions, test_grade_command).
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import socket
import subprocess
import textwrap
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from string import Template

import nbformat
import psutil
import pytest
from submissions import grade_command

from course_utils.cli import main
from course_utils.grading.notebooks import course_meta
from course_utils.grading.runner import cgroups, sandbox
from course_utils.hpc import allocated_cpus
from course_utils.paths import PACKAGE_DIR, REPO_ROOT

SOLUTION = REPO_ROOT / "solutions" / "01_tensors.ipynb"
RELEASE = REPO_ROOT / "notebooks" / "01_tensors.ipynb"
# Lesson 01's longest cell takes about 3 s on two idle cores; here two notebooks run at once
# (-j 2) beside the long lane's other half, Slurm jobs among them (make test-long): up to five
# on two cores.
CELL_TIMEOUT, NOTEBOOK_TIMEOUT = 20, 90
MAX_PROCS, MAX_FILE, MAX_DISK = 64, 64 * 2**20, 256 * 2**20
FUNCTION = {
    "01.1": "batch_flatten",
    "01.2": "standardize",
    "01.3": "to_numpy",
    "01.4": "grad_of_loss",
}
MARK = f"{os.getpid()}{time.monotonic_ns() % 10**6}"  # names what the submissions leave or write
SECRET = f"instructor-secret-{MARK}"


def sandboxed(test):
    """A test of the one `course grade` run of every submission (about 3 minutes on 2 cores):
    in the sandbox, and in the long lane."""
    return pytest.mark.slow(pytest.mark.bwrap(test))


def solution() -> nbformat.NotebookNode:
    return nbformat.read(SOLUTION, as_version=4)


def cell(nb, exercise: str, role: str = "exercise"):
    return next(
        c
        for c in nb.cells
        if (course_meta(c).get("exercise"), course_meta(c).get("role")) == (exercise, role)
    )


# 01.2's check takes two functions: answers that break `standardize` keep a measurement beside it.
MEASURES = "\ndef broadcast_vs_loop(x):\n    return {'result': standardize(x)}"


def printing_measurement(solved: str) -> str:
    """01.2's solution whose measurement prints once during the check (nbval compares output)."""
    head = "def broadcast_vs_loop(x):\n"
    assert head in solved
    return solved.replace(head, head + "    print('debug', x.shape)\n")


def with_answer(nb, exercise: str, source: str):
    cell(nb, exercise).source = source
    return nb


def attempt(nb, exercise: str, code: str):
    """The exercise's solution, then `code`, which sets `escaped`: an attempt that works costs
    the exercise its point."""
    solved = cell(solution(), exercise).source
    cell(nb, exercise).source = (
        f"{solved}\n{code.strip()}\nif escaped:  # the attempt worked\n"
        f"    {FUNCTION[exercise]} = None"
    )
    return nb


@dataclass(frozen=True)
class Machine:
    """The grader's machine as the test sets it up: what submissions go after."""

    root: Path
    port: int  # a TCP server of the test on 127.0.0.1

    subs = property(lambda self: self.root / "subs")
    out = property(lambda self: self.root / "out")
    home = property(lambda self: self.root / "home")  # the grader's $HOME
    secret = property(lambda self: self.home / ".ssh" / "id_ed25519")  # planted in $HOME
    note = property(lambda self: self.out / "previous-grading.txt")  # planted in the gradebook
    outside = property(lambda self: self.root / "outside.txt")
    drops = property(
        lambda self: [Path(f"/tmp/course-pwned-{MARK}"), Path(f"/dev/shm/pwned-{MARK}")]
    )
    sleeper = f"3600.{MARK}"  # the argument of `sleep` processes a submission leaves behind


# Attempts, per exercise; `$name`s are filled in by `attempts` with this machine's values.
READS = {  # what no submission may see, or even know exists
    "01.1": """
        import glob, json, os
        escaped = any(os.path.exists(p) for p in $solutions)
        for name in glob.glob('*.ipynb'):  # the notebook being graded: no reference outputs
            escaped |= any(c.get('outputs') for c in json.load(open(name))['cells'])
        """,
    "01.2": """
        import os
        escaped = any(os.path.exists(p) for p in $others)  # other learners, the gradebook
        """,
    "01.3": """
        import os
        escaped = any(os.path.exists(p) for p in $home) or $secret in str(os.environ)
        """,
    "01.4": """
        import socket
        try:
            socket.create_connection(('127.0.0.1', $port), timeout=3).close()
            escaped = True
        except OSError:
            escaped = False
        """,
}
DAMAGE = {
    "01.1": """
        escaped = False
        for path in $targets:  # outside its folder
            try:
                open(path, 'w').write('pwned')
                escaped = True
            except OSError:
                pass
        for path in $drops:  # its own /tmp and /dev/shm: allowed, and gone with the sandbox
            open(path, 'w').write('only inside')
        """,
    "01.2": """
        import os
        escaped, written = False, 0
        try:  # one file over the size limit
            with open('big', 'wb') as f:
                f.write(b'x' * ($max_file + 2**20))
            escaped = True
        except OSError:
            pass
        try:  # files under the limit until the disk is full
            for i in range(1000):
                with open(f'fill{i}', 'wb') as f:
                    for _ in range(16):
                        f.write(b'x' * 2**20)
                        written += 2**20
        except OSError:
            pass
        escaped |= written > $max_disk
        for name in os.listdir('.'):
            if name.startswith('fill') or name == 'big':
                os.remove(name)
        """,
    "01.3": """
        try:
            hoard = bytearray(8 * 2**30)
            escaped = True
            del hoard
        except MemoryError:
            escaped = False
        """,
    "01.4": """
        import os, subprocess
        pid = os.fork()
        if pid == 0:  # a daemon: double fork, new session, no token in its environment
            os.setsid()
            if os.fork() == 0:
                os.execve('/bin/sleep', ['sleep', $sleeper], {})
            os._exit(0)
        os.waitpid(pid, 0)
        subprocess.Popen(['sleep', $sleeper], start_new_session=True, env={})
        escaped = False  # only the machine can tell: nothing of it may outlive the run
        """,
}
FORK_BOMB = """
    import os, subprocess, sys, time
    bomb = ('import os, time\\nwhile True:\\n    try:\\n        os.fork()\\n'
            '    except OSError:\\n        time.sleep(0.2)')  # slow at the limit: no CPU burnt
    subprocess.Popen([sys.executable, '-c', bomb])
    time.sleep(3)
    tasks = 0  # processes and threads: what the limit counts
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            tasks += len(os.listdir(f'/proc/{pid}/task'))
        except OSError:
            pass
    escaped = tasks > $max_procs
    """
KILLER = """
    import os, signal
    for pid in os.listdir('/proc'):  # the grader's process group, found by its command line
        try:
            if b'\\0grade\\0' in open(f'/proc/{pid}/cmdline', 'rb').read():
                os.killpg(os.getpgid(int(pid)), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    os.kill(-1, signal.SIGKILL)  # every process it may signal
    escaped = False
    """


def attack(template: str, m: Machine) -> str:
    """An attempt's code with this machine's paths, port and limits in it."""
    values = {
        "solutions": [SOLUTION, SOLUTION.parent],
        "others": [m.subs / "full" / "01_tensors.ipynb", m.subs, m.note, m.out],
        "home": [m.secret, m.home],
        "secret": SECRET,
        "port": m.port,
        "targets": [m.outside, m.home / "pwned", m.subs / "pwned", m.out / "pwned"]
        + [SOLUTION.parent / f"pwned-{MARK}", PACKAGE_DIR / f"pwned_{MARK}.py"],
        "drops": m.drops,
        "sleeper": m.sleeper,
        "max_file": MAX_FILE,
        "max_disk": MAX_DISK,
        "max_procs": MAX_PROCS,
    }
    texts = {
        k: repr([str(p) for p in v]) if isinstance(v, list) else repr(v) for k, v in values.items()
    }
    return textwrap.dedent(Template(template).substitute(texts))


def make_submissions(m: Machine) -> dict[str, nbformat.NotebookNode | str]:
    """Learner name -> notebook (or raw text), each exercising one way a submission goes wrong."""
    subs = {"full": solution(), "empty": nbformat.read(RELEASE, as_version=4)}

    nb = solution()  # cells in reverse order; a wrong answer; a print during a check
    with_answer(nb, "01.3", "def to_numpy(t):\n    return t.detach().clone().numpy()")
    with_answer(nb, "01.2", printing_measurement(cell(nb, "01.2").source))
    nb.cells.reverse()
    subs["partial"] = nb

    nb = nbformat.read(RELEASE, as_version=4)  # copies 01.1 out of solutions/, writes outside its
    cell(nb, "01.1").source = (  # folder, and edits check cells to pass stubs anyway
        "import json\nfrom course_utils.paths import REPO_ROOT\n"
        "_nb = json.load(open(REPO_ROOT / 'solutions' / '01_tensors.ipynb'))\n"
        "exec(next(''.join(c['source']) for c in _nb['cells']\n"
        "          if c['metadata'].get('course', {}).get('role') == 'exercise'))\n"
        f"open({str(m.outside)!r}, 'w').write('written by a submission')"
    )
    cell(
        nb, "01.2", "check"
    ).source = 'check("01.2", lambda x: (x - x.mean(0)) / x.std(0, unbiased=False))'
    cell(nb, "01.3", "check").source = 'print("[01.3] passed: works on tensors that require grad")'
    cell(nb, "01.4").source = (
        "check = lambda *a: print('[01.4] passed: d/dx sum(x^3 + 2x) = "
        "3x^2 + 2, computed by autograd')"
    )
    subs["cheat"] = nb

    nb = solution()  # 01.4 deleted; 01.1 duplicated, a wrong copy first; saved as nbformat 3
    nb.cells.remove(cell(nb, "01.4"))
    wrong = nbformat.from_dict(cell(nb, "01.1"))
    wrong.id = "copy"
    wrong.source = "def batch_flatten(images):\n    return images.clone().flatten(1)"
    nb.cells.insert(0, wrong)
    subs["old"] = nbformat.writes(nbformat.convert(nb, 3), version=3)

    nb = solution()  # 100 MB of output; sys.exit at top level and inside a function; os._exit
    cell(nb, "01.1").source += "\nprint('x' * 100_000_000)\nimport sys\nsys.exit()"
    with_answer(nb, "01.2", "import sys\ndef standardize(x):\n    sys.exit(3)" + MEASURES)
    cell(nb, "01.4").source = "import os\nos._exit(1)"
    subs["exits"] = nb

    nb = solution()  # a segfault inside the checked function
    with_answer(nb, "01.3", "import ctypes\ndef to_numpy(t):\n    return ctypes.string_at(0)")
    subs["crash"] = nb

    nb = solution()  # an interruptible loop in a check; then sleep forever, deaf to interrupts,
    with_answer(nb, "01.2", "def standardize(x):\n    while True:\n        pass" + MEASURES)
    cell(nb, "01.4").source = (  # beside a child process that would sleep on
        f"import signal, subprocess, time\nsubprocess.Popen(['sleep', {m.sleeper!r}])\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(10**9)"
    )
    subs["loop"] = nb

    subs["snoop"], subs["vandal"] = solution(), solution()
    for exercise in FUNCTION:
        attempt(subs["snoop"], exercise, attack(READS[exercise], m))
        attempt(subs["vandal"], exercise, attack(DAMAGE[exercise], m))
    subs["bomb"] = attempt(solution(), "01.4", attack(FORK_BOMB, m))
    subs["killer"] = attempt(solution(), "01.4", attack(KILLER, m))

    subs["broken"] = nbformat.writes(solution())[:-200]  # malformed JSON
    m.subs.mkdir(parents=True)
    for name, nb in subs.items():
        text = nb if isinstance(nb, str) else nbformat.writes(nb)
        if name in ("full", "empty"):  # the folder-per-learner layout
            (m.subs / name).mkdir()
            (m.subs / name / "01_tensors.ipynb").write_text(text)
        else:  # the flat layout
            (m.subs / f"{name}__01_tensors.ipynb").write_text(text)
    return subs


def plant(m: Machine) -> None:
    """Files the instructor has where no submission may reach: a key in $HOME, a note in the
    gradebook folder."""
    m.secret.parent.mkdir(parents=True)
    m.secret.write_text(SECRET)
    m.out.mkdir()
    m.note.write_text("grades of last year\n")


def snapshot(*folders: Path) -> dict[str, tuple]:
    """Every file under `folders` (byte-compiled caches aside): path -> (size, mtime, digest)."""
    files = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                stat = path.stat()
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                files[str(path)] = (stat.st_size, stat.st_mtime_ns, digest)
    return files


class Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


def ours(p: psutil.Process) -> bool:
    """A process of this test's grading runs: started in the sandbox (its PYTHONPATH is this
    course_utils'), a bwrap of these runs, or one a submission started by name."""
    try:
        cmdline, env = " ".join(p.cmdline()), p.environ()
        alive = p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
    in_run = "COURSE_GRADE_RUN" in env and env.get("PYTHONPATH") == str(PACKAGE_DIR.parent)
    return alive and (in_run or MARK in cmdline or f"--ro-bind {PACKAGE_DIR} " in cmdline)


def graded_by_another(p: psutil.Process) -> bool:
    """Whether `p` belongs to a `course grade` still running (another test lane's, on this
    checkout): its nearest ancestor that is not a process of a run is that grader. A survivor
    of this test's run, whose grader has ended, hangs from init instead."""
    try:
        for parent in p.parents():
            if not ours(parent):
                words = " ".join(_cmdline(parent))
                return "grade" in words and "course" in words
    except psutil.Error:
        return False
    return False


def survivors(before: set[int], wait: float = 5) -> list[str]:
    """Processes of the run still there after `wait` seconds (a kill may take a moment)."""
    deadline = time.monotonic() + wait
    while True:
        left = [
            p
            for p in psutil.process_iter()
            if p.pid not in before and ours(p) and not graded_by_another(p)
        ]
        if not left or time.monotonic() > deadline:
            return [f"{p.pid}: {' '.join(_cmdline(p))[:200]}" for p in left]
        time.sleep(0.2)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    m = Machine(tmp_path_factory.mktemp("grade"), (listener := Listener()).port)
    make_submissions(m)
    plant(m)
    guarded = (m.home, m.subs, SOLUTION.parent, RELEASE.parent, PACKAGE_DIR)
    files_before = snapshot(*guarded)
    before = {p.pid for p in psutil.process_iter()}
    proc = subprocess.run(
        grade_command(
            m.subs,
            m.out,
            *("-j", "2", "--timeout", str(NOTEBOOK_TIMEOUT), "--cell-timeout", str(CELL_TIMEOUT)),
            *("--max-procs", str(MAX_PROCS), "--max-memory", "6G"),
            *("--max-file-size", str(MAX_FILE), "--max-disk", str(MAX_DISK)),
        ),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
        env=dict(os.environ, HOME=str(m.home), COURSE_TEST_SECRET=SECRET),
    )
    left = survivors(before)
    listener.sock.close()
    with open(m.out / "gradebook.csv") as f:
        rows = {r["learner"]: r for r in csv.DictReader(f)}
    return {
        "proc": proc,
        "rows": rows,
        "out": m.out,
        "machine": m,
        "survivors": left,
        "connections": listener.accepted,
        "files": (files_before, snapshot(*guarded)),
    }


def _cmdline(p) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def points(row) -> dict[str, int]:
    return {k: int(row[k]) for k in ("01.1", "01.2", "01.3", "01.4")}


def feedback(graded, learner) -> str:
    return (graded["out"] / "feedback" / f"{learner}.md").read_text()


LEARNERS = {"full", "empty", "partial", "cheat", "old", "exits", "crash", "loop", "broken"}
ATTACKERS = {"snoop", "vandal", "bomb", "killer"}


@sandboxed
def test_the_run_completes_and_the_gradebook_is_complete(graded):
    assert graded["proc"].returncode == 0, graded["proc"].stderr[-3000:]
    assert set(graded["rows"]) == LEARNERS | ATTACKERS
    assert "graded 13 submissions" in graded["proc"].stdout
    assert not graded["survivors"], "processes of the run survived it"
    for row in graded["rows"].values():
        assert row["sandbox"] == (
            f"bubblewrap, no network; processes {MAX_PROCS} "
            f"({cgroups.process_cap_kind(MAX_PROCS)}), memory 6 GiB, file 64 MiB, "
            f"disk 256 MiB, CPU {math.ceil(NOTEBOOK_TIMEOUT * allocated_cpus())} s"
        )


@sandboxed
def test_honest_submissions(graded):
    rows = graded["rows"]
    assert (rows["full"]["total"], rows["full"]["max"], rows["full"]["status"]) == ("4", "4", "ok")
    assert (rows["empty"]["total"], rows["empty"]["status"]) == ("0", "ok")
    assert "not attempted yet" in feedback(graded, "empty")
    assert points(rows["partial"]) == {"01.1": 1, "01.2": 0, "01.3": 0, "01.4": 1}
    text = feedback(graded, "partial")
    assert "a copy (use .numpy())" in text
    assert "output differs from the reference" in text and "debug" in text  # as the check printed


@sandboxed
def test_edited_check_cells_do_not_count_and_snooping_is_flagged(graded):
    row = graded["rows"]["cheat"]
    assert points(row) == {"01.1": 0, "01.2": 0, "01.3": 0, "01.4": 0}  # solutions/ is not there
    assert row["status"] == "ok"
    assert "01.1: mentions solutions/" in row["flags"]
    assert "01.1: opens or removes files" in row["flags"]
    assert "01.4: touches the grading machinery" in row["flags"]
    assert "FileNotFoundError" in feedback(graded, "cheat")


@sandboxed
def test_old_format_with_deleted_and_duplicated_cells(graded):
    row = graded["rows"]["old"]
    assert points(row) == {"01.1": 1, "01.2": 1, "01.3": 1, "01.4": 0}
    text = feedback(graded, "old")
    assert "exercise 01.4: no exercise cell found" in text
    assert "exercise 01.1: 2 cells carry this id" in text


@sandboxed
def test_exits_crashes_and_floods_get_a_status_and_keep_earlier_points(graded):
    exits, crash = graded["rows"]["exits"], graded["rows"]["crash"]
    assert points(exits) == {"01.1": 1, "01.2": 0, "01.3": 1, "01.4": 0}
    assert exits["status"] == "crashed" and "exercise 01.4" in exits["reason"]
    assert "sys.exit(3)" in feedback(graded, "exits")
    assert (graded["out"] / "logs" / "exits__01.log").stat().st_size < 100_000
    assert points(crash) == {"01.1": 1, "01.2": 1, "01.3": 0, "01.4": 0}
    assert crash["status"] == "crashed" and "check of 01.3" in crash["reason"]


@sandboxed
def test_endless_loops_and_sleep_forever_are_cut_off(graded):
    row = graded["rows"]["loop"]
    assert row["status"] == "timeout" and "check of 01.2" in row["reason"]
    assert points(row) == {"01.1": 1, "01.2": 0, "01.3": 1, "01.4": 0}
    assert f"did not finish within {CELL_TIMEOUT} s" in feedback(graded, "loop")


@sandboxed
def test_nothing_hidden_is_visible_and_the_network_is_unreachable(graded):
    """solutions/ and the reference outputs, another learner's notebook and the gradebook
    folder, the instructor's home and environment, a server on the host's loopback."""
    row = graded["rows"]["snoop"]
    assert (points(row), row["status"]) == ({"01.1": 1, "01.2": 1, "01.3": 1, "01.4": 1}, "ok")
    assert graded["connections"] == 0


@sandboxed
def test_writes_disk_memory_and_daemons_are_bounded(graded):
    """Writes outside its folder, a file over the size limit, a full disk, 8 GiB, daemons."""
    row = graded["rows"]["vandal"]
    assert (points(row), row["status"]) == ({"01.1": 1, "01.2": 1, "01.3": 1, "01.4": 1}, "ok")


@sandboxed
def test_a_fork_bomb_stays_within_the_process_limit(graded):
    row = graded["rows"]["bomb"]
    assert (points(row), row["status"]) == ({"01.1": 1, "01.2": 1, "01.3": 1, "01.4": 1}, "ok")


@sandboxed
def test_killing_every_process_it_sees_ends_only_its_own_run(graded):
    row = graded["rows"]["killer"]
    assert points(row) == {"01.1": 1, "01.2": 1, "01.3": 1, "01.4": 0}
    assert row["status"] == "crashed" and "exercise 01.4" in row["reason"]


@sandboxed
def test_the_machine_is_unchanged(graded):
    """Planted files intact, nothing new outside the work folders but the grader's outputs."""
    m, (before, after) = graded["machine"], graded["files"]
    assert after == before
    assert sorted(p.name for p in m.root.iterdir()) == ["home", "out", "subs"]
    assert sorted(p.name for p in m.out.iterdir()) == [
        "feedback",
        "gradebook.csv",
        "junit.xml",
        "logs",
        m.note.name,
    ]
    assert m.note.read_text() == "grades of last year\n" and m.secret.read_text() == SECRET
    assert not [p for p in m.drops if p.exists()]


@sandboxed
def test_unreadable_notebook(graded):
    row = graded["rows"]["broken"]
    assert (row["status"], row["total"]) == ("unreadable", "0")
    assert "not a readable notebook" in row["reason"]


@sandboxed
def test_junit_report(graded):
    root = ET.parse(graded["out"] / "junit.xml").getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert suites["full.01"].get("failures") == "0"
    assert suites["partial.01"].get("failures") == "2"
    assert len(suites) == 13


@pytest.mark.slow  # two gradings of lesson 01: about 35 s
def test_no_sandbox_is_explicit_and_the_gradebook_says_so(tmp_path):
    """--no-sandbox grades as today: a full and a blank notebook score 4 and 0."""
    subs = tmp_path / "subs"
    for name, source in (("full", SOLUTION), ("empty", RELEASE)):
        (subs / name).mkdir(parents=True)
        (subs / name / "01_tensors.ipynb").write_text(source.read_text())
    proc = subprocess.run(
        grade_command(subs, tmp_path / "out", "-j", "2", "--no-sandbox", "--timeout", "120"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--no-sandbox: learners' code runs with your rights" in proc.stderr
    with open(tmp_path / "out" / "gradebook.csv") as f:
        rows = {r["learner"]: r for r in csv.DictReader(f)}
    assert [(rows[n]["total"], rows[n]["sandbox"]) for n in ("full", "empty")] == [
        ("4", "none"),
        ("0", "none"),
    ]


def test_grade_refuses_when_bubblewrap_cannot_run(tmp_path, monkeypatch, capsys):
    """A machine with bwrap where user namespaces are off: the refusal names the fix."""
    stub = tmp_path / "bwrap"
    stub.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    stub.chmod(0o755)
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "ann__01_tensors.ipynb").write_text(SOLUTION.read_text())
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(stub))
    monkeypatch.chdir(REPO_ROOT)
    argv = ["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--max-procs", "0"]
    assert main(argv) == 2
    said = capsys.readouterr().err
    assert "cannot grade in a sandbox: bubblewrap" in said
    assert "No permissions to create new namespace" in said
    assert "allow unprivileged user namespaces" in said and "--no-sandbox" in said
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(tmp_path / "missing"))
    assert main(argv) == 2
    assert "apt-get install bubblewrap" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing graded
