"""A run in a bubblewrap sandbox: what a submission sees, what bounds it, and whether it can run.

`course grade` runs each submission's nbval run (pytest and the kernel it starts) inside
`bwrap` (Debian package `bubblewrap`), with new user, PID, network, IPC, UTS and cgroup
namespaces, so it has no network but loopback, sees only its own processes, and dies with the
grader (`--die-with-parent`; the PID namespace ends every process in it with its first one).
The file system it sees is a whitelist (`Layout`): /usr and a few files of /etc, the Python
installation, the `course_utils` package, the C++ sources (cpp/) and the course's programs the
grader built (build/cpp) read-only, at their own paths; one writable tmpfs of `max_disk` bytes
at /tmp (HOME, TMPDIR, the notebook's folder, the build folder of lesson 07's C++ builds); a
fresh /dev with its own /dev/shm tmpfs; the run's record file. Everything else (solutions/, the
gradebook folder, other submissions, the instructor's home) is not there at all. The environment
is cleared.

Resource limits (`Limits`, limits.py) are set inside the sandbox with util-linux's `prlimit`:
address space, file size, CPU time, no core dumps, and processes (RLIMIT_NPROC; as root, whose
processes ignore it, a pids cgroup of the run's own: cgroups.py). README.md, "Grading", says
what this guarantees and what it does not.

`bwrap_command` only builds a command line from a plain description, so it is tested without
bwrap; `problem` is the one function that runs it, to say whether (and why not) it works here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import processes
from course_utils.grading.runner import cgroups
from course_utils.grading.runner.limits import DEFAULTS
from course_utils.paths import PACKAGE_DIR

BWRAP_ENV = "COURSE_BWRAP"  # another bwrap executable (tests point it at a failing stub)
SANDBOX_UID = 65534  # "nobody" inside the sandbox
WORK = "/tmp"  # the one writable folder: a tmpfs of `max_disk` bytes (TMPDIR)
HOME = "/tmp/grading"  # HOME, current folder and the notebook's folder, inside WORK
BUILD = "/tmp/build"  # COURSE_BUILD_DIR: lesson 07's C++ builds and packages, inside WORK
RUN_DIR = "/run/course"  # the run's own files: pytest.ini (read-only) and the record (written)
HOSTNAME = "grading"
TOKEN = "COURSE_GRADE_RUN"  # the variable whose value (one per run) marks every process of a run

# What Python and the kernel need from the system, read-only. On merged-/usr systems /bin, /lib
# and friends are symlinks into /usr and are recreated as symlinks.
SYSTEM_DIRS = ("/usr",)
TOP_LEVEL_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = (
    "/etc/alternatives",  # Debian's c++, cc and friends are links through it (lesson 07's builds)
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
)
# Top-level packages of a grading run; the sys.path folders that hold them are bound read-only
# (a venv or the interpreter's prefix usually holds them all; a node may add a --target folder).
RUN_PACKAGES = ("pytest", "nbval", "ipykernel", "jupyter_client", "zmq", "nbformat", "torch")

INSTALL_FIX = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; RHEL/Fedora: dnf install "
    "bubblewrap), or pass --no-sandbox to grade without one (learners' code then runs with "
    "your rights)"
)
USERNS_FIX = (
    "bubblewrap needs user namespaces: ask the admins to allow unprivileged user namespaces "
    "(sysctl user.max_user_namespaces=15000 and, where it exists, "
    "kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 also "
    "kernel.apparmor_restrict_unprivileged_userns=0), or pass --no-sandbox to grade without "
    "a sandbox (learners' code then runs with your rights)"
)


@dataclass(frozen=True)
class Layout:
    """What one sandboxed run sees: a plain description that `bwrap_command` turns into argv.

    Paths in `read_only` appear read-only at their own place; `files` and `writable` map a host
    file to a path inside (the run's own files); everything else does not exist in the sandbox.
    """

    read_only: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...] = ()  # (target, link), e.g. ("usr/bin", "/bin")
    files: tuple[tuple[str, str], ...] = ()  # (host file, path inside), read-only
    writable: tuple[tuple[str, str], ...] = ()  # (host file, path inside), written by the run
    env: Mapping[str, str] = field(default_factory=dict)
    max_disk: int = DEFAULTS.max_disk  # bytes of the tmpfs at WORK, and of the one at /dev/shm
    cwd: str = HOME
    # Folders inside a read-only path that the run must not see: (folder, files of it shown).
    masked: tuple[tuple[str, tuple[str, ...]], ...] = ()


def bwrap_command(layout: Layout, command: list[str], bwrap: str = "bwrap") -> list[str]:
    """The bwrap command line that runs `command` in `layout`'s sandbox (see the module's doc)."""
    argv = [
        bwrap,
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--hostname",
        HOSTNAME,
        "--unshare-cgroup-try",
        "--die-with-parent",  # nothing outlives the grader, even when it is killed
        "--new-session",  # no TIOCSTI into the grader's terminal, no signals to its group
        "--clearenv",  # the instructor's tokens and settings stay outside
    ]
    # /dev is a fresh, small tmpfs: made read-only, but for its own sized /dev/shm.
    argv += ["--dev", "/dev", "--remount-ro", "/dev"]
    argv += ["--size", str(layout.max_disk), "--tmpfs", "/dev/shm", "--proc", "/proc"]
    # The work tmpfs goes first: a venv or a clone under /tmp is bound on top of it, not hidden.
    argv += ["--size", str(layout.max_disk), "--tmpfs", WORK, "--dir", HOME]
    for path in layout.read_only:
        argv += ["--ro-bind", path, path]
    for folder, shown in layout.masked:  # an empty folder in its place, but for `shown`
        argv += ["--tmpfs", folder]
        for name in shown:
            argv += ["--ro-bind", f"{folder}/{name}", f"{folder}/{name}"]
        argv += ["--remount-ro", folder]
    for target, link in layout.symlinks:
        argv += ["--symlink", target, link]
    for host, inside in layout.files:
        argv += ["--ro-bind", host, inside]
    for host, inside in layout.writable:
        argv += ["--bind", host, inside]
    argv += ["--remount-ro", "/"]  # the root bwrap built: no new files beside the binds
    for name, value in sorted(layout.env.items()):
        argv += ["--setenv", name, value]
    return argv + ["--chdir", layout.cwd, "--", *command]


def limit_command(
    max_procs: int, max_memory: int, max_file_size: int, cpu_time: int, prlimit: str
) -> list[str]:
    """`prlimit` options that set the run's resource limits inside the sandbox (0: no limit).

    RLIMIT_NPROC must be set inside the new user namespace: set before it, it would count every
    process of the instructor's user instead of the sandbox's.
    """
    argv = [prlimit, "--core=0"]
    for option, value in (
        ("nproc", max_procs),
        ("as", max_memory),
        ("fsize", max_file_size),
        ("cpu", cpu_time),
    ):
        if value:
            argv.append(f"--{option}={value}")
    return argv + ["--"]


# ---- what the sandbox shows ----------------------------------------------------------------


def system_layout() -> tuple[list[str], list[tuple[str, str]]]:
    """The system paths a run needs: (read-only paths, top-level symlinks into /usr)."""
    read_only = [p for p in SYSTEM_DIRS if os.path.isdir(p)]
    links = []
    for top in TOP_LEVEL_LINKS:
        if os.path.islink(top):
            links.append((os.readlink(top), top))
        elif os.path.isdir(top):
            read_only.append(top)
    read_only += [p for p in SYSTEM_FILES if os.path.exists(p)]
    return read_only, links


def python_paths(packages: Iterable[str] = RUN_PACKAGES) -> list[str]:
    """Read-only paths for Python: its prefixes (a venv and the interpreter it links to), the
    sys.path folders holding `packages`, and course_utils' own folder (not the repository)."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths = [os.path.realpath(p) for p in prefixes] + [str(PACKAGE_DIR)]
    for name in packages:
        entry = _sys_path_entry(name)
        if entry and not _covered(entry, paths):
            paths.append(entry)
    return _outermost(paths)


def course_sources() -> list[str]:
    """The course's C++ sources, which lesson 07's programs build against (read-only; the build
    goes to BUILD); none where the course was installed without them."""
    from course_utils.cpp import cpp_source_dir  # imports torch: only when a layout is built

    try:
        return [str(cpp_source_dir())]
    except ValueError:
        return []


def course_programs() -> list[str]:
    """The course's own C++ programs as the grader built them before the runs (build/cpp, when
    it holds all of them): shown read-only, so a run of lesson 07 uses them instead of building
    them cold (cpp.PREBUILT_VARIABLE); none where they were not built."""
    from course_utils import cpp  # imports torch: only when a layout is built

    folder = cpp.programs_dir()
    return [str(folder)] if cpp.holds_programs(folder) else []


def visible_paths() -> tuple[list[str], list[tuple[str, str]]]:
    """Everything a grading run shows: (read-only paths: system, Python, the C++ sources and
    programs; symlinks)."""
    read_only, links = system_layout()
    shown = read_only + python_paths() + course_sources() + course_programs()
    return _outermost(shown), links


def _sys_path_entry(package: str) -> str | None:
    """The sys.path folder `package` is imported from, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    origin = os.path.realpath(spec.origin)
    folder = os.path.dirname(os.path.dirname(origin) if spec.submodule_search_locations else origin)
    return folder if folder != str(PACKAGE_DIR.parent) else None  # never the whole repository


def _covered(path: str, parents: Iterable[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in parents)


def _outermost(paths: list[str]) -> list[str]:
    """`paths` without duplicates and without paths inside another one, in order."""
    kept: list[str] = []
    for p in sorted(set(paths), key=len):
        if not _covered(p, kept):
            kept.append(p)
    return [p for p in dict.fromkeys(paths) if p in kept]


def check_hidden(read_only: Iterable[str], hidden: Iterable[str | os.PathLike]) -> None:
    """ValueError when a read-only path would show a folder that must stay hidden
    (solutions/, the submissions, the gradebook folder, the instructor's home)."""
    for path in read_only:
        for secret in hidden:
            secret = os.path.realpath(secret)
            if _covered(secret, [path]):
                raise ValueError(
                    f"the sandbox would show {path}, which holds {secret}; it must stay hidden "
                    "from submissions: install the course's Python environment outside it"
                )


def run_variables(token: str, threads: int) -> dict[str, str]:
    """What every grading run sets, in the sandbox or not: no display, no bytecode written into
    the submission, the run's token (it finds the run's processes), thread pools sized."""
    return {
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
        TOKEN: token,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
    }


def sandbox_env(token: str, threads: int) -> dict[str, str]:
    """The whole environment inside the sandbox (bwrap clears everything else)."""
    env = {
        "HOME": HOME,
        "TMPDIR": WORK,
        "PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": str(PACKAGE_DIR.parent),  # only course_utils is there: see python_paths
        "COURSE_BUILD_DIR": BUILD,  # the repository's build/ is not there; this run's own is
        "USER": "learner",
        "LOGNAME": "learner",
        "LANG": "C.UTF-8",
        **run_variables(token, threads),
    }
    sources = course_sources()
    if sources:  # where the grader found them (COURSE_CPP_DIR or the repository's cpp/)
        env["COURSE_CPP_DIR"] = sources[0]
    programs = course_programs()
    if programs:
        from course_utils.cpp import PREBUILT_VARIABLE

        env[PREBUILT_VARIABLE] = programs[0]
    return env


def identity_files(folder: Path) -> list[tuple[str, str]]:
    """/etc/passwd, /etc/group and /etc/hosts for the sandbox, written into `folder`: the
    sandbox's user only (not the machine's accounts), and its host name on loopback."""
    texts = {
        "passwd": f"learner:x:{SANDBOX_UID}:{SANDBOX_UID}:learner:{HOME}:/bin/sh\n",
        "group": f"learner:x:{SANDBOX_UID}:\n",
        "hosts": f"127.0.0.1 localhost {HOSTNAME}\n::1 localhost\n",
    }
    files = []
    for name, text in texts.items():
        (folder / name).write_text(text)
        files.append((str(folder / name), f"/etc/{name}"))
    return files


# ---- can a sandbox run here? ---------------------------------------------------------------


def find_bwrap() -> str | None:
    """The bwrap executable: $COURSE_BWRAP when set, else `bwrap` on PATH."""
    return os.environ.get(BWRAP_ENV) or shutil.which("bwrap")


def problem(max_procs: int, timeout: float = 60, masked=()) -> str | None:
    """Why a grading sandbox cannot run here, with the fix; None when one ran.

    Starts the sandbox a real run gets (same layout, `masked` folders and limits) with `python
    -c "import course_utils"`, so a missing path in the whitelist shows up here, not per
    notebook.
    """
    bwrap = find_bwrap()
    if not bwrap or not (os.access(bwrap, os.X_OK) and os.path.isfile(bwrap)):
        where = f"{BWRAP_ENV}={bwrap}" if os.environ.get(BWRAP_ENV) else "on PATH"
        return f"bubblewrap (bwrap) is not found {where}: {INSTALL_FIX}"
    prlimit = shutil.which("prlimit")
    if not prlimit:
        return "prlimit (util-linux) is not found on PATH: install util-linux"
    if max_procs and not cgroups.nproc_counts() and cgroups.pids_cgroup_parent() is None:
        return (
            "as root, the process limit needs a pids cgroup (root ignores RLIMIT_NPROC) and "
            "none is writable here: grade as an unprivileged user, mount the cgroup pids "
            "controller, or pass --max-procs 0 to grade without a process limit"
        )
    read_only, links = visible_paths()
    layout = Layout(tuple(read_only), tuple(links), env=sandbox_env("probe", 1), masked=masked)
    command = limit_command(max_procs, 0, 0, 0, prlimit)
    command += [sys.executable, "-c", "import course_utils"]
    try:
        with cgroups.process_cap(max_procs) as group:
            prefix = group.enter_command() if group else []
            done = processes.run(prefix + bwrap_command(layout, command, bwrap), timeout=timeout)
    except OSError as e:
        return f"bubblewrap ({bwrap}) could not be run: {e}; {USERNS_FIX}"
    if done.timed_out:
        return f"bubblewrap ({bwrap}) did not start a sandbox within {timeout:g} s; {USERNS_FIX}"
    if not done.ok:
        said = re.sub(r"\s+", " ", (done.stderr or done.stdout).strip())[-300:] or "no message"
        return (
            f"bubblewrap ({bwrap}) could not start a sandbox ({done.describe()}: "
            f"{said}); {probe_fix(said)}"
        )
    return None


# Words in bwrap's messages when the kernel refuses it a namespace ("No permissions to creating
# new namespace", "Creating new namespace failed", "setting up uid map: ...").
_NAMESPACE_REFUSALS = ("namespace", "uid map", "setting up uid", "operation not permitted")


def probe_fix(message: str) -> str:
    """The fix for a failed sandbox probe, from what it printed: the kernel refusing namespaces
    is the admins' to change; anything else (Python not found inside, an import failing) means
    the whitelist misses a path, which is the course's bug to report."""
    if any(word in message.lower() for word in _NAMESPACE_REFUSALS):
        return USERNS_FIX
    return (
        f"the sandbox started but {sys.executable} could not import course_utils inside it: "
        "a path it needs is missing from the sandbox's whitelist (course_utils/grading/"
        "runner/sandbox.py); report this message to the course, or pass --no-sandbox to grade "
        "without a sandbox (learners' code then runs with your rights)"
    )
