"""The command line and environment of one run, in the sandbox or as the grader's user.

Both run `pytest --nbval` on the notebook with the two plugins (nbval_record, kernel_watch),
the per-cell time limit, and the run's token and thread counts (`sandbox.run_variables`). In
the sandbox the notebook and pytest.ini are bound read-only and the record is the one host file
the run writes; as the grader's user (`course check`, `course grade --no-sandbox`) HOME and
TMPDIR are the notebook's folder. Either way the run gets the caller's `variables` (the run's own
settings win over them) and its `sockets`, each variable naming its socket as the run sees it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from course_utils.grading.runner import sandbox
from course_utils.grading.runner.limits import Limits

# Loaded with -p: the cell record, the kernel watch, and the announcements of check cells.
PLUGINS = (f"{__package__}.nbval_record", f"{__package__}.kernel_watch", f"{__package__}.announce")
RECORD, INI = "cells.jsonl", "pytest.ini"  # the run's own files, in its private folder


def command(
    notebook: Path,
    limits: Limits,
    private: Path,
    token: str,
    variables: Mapping[str, str] | None = None,
    sockets: Mapping[str, Path] | None = None,
    announce_fd: int | None = None,
    masked: tuple = (),
):
    """(argv, environment) of the run of `notebook`; `private` holds the run's own files;
    `variables` are set in the run (pytest and its kernel); `sockets`: variable -> a Unix socket
    of the caller's, shown in the run; `announce_fd`: a descriptor the run inherits, on which its
    pytest announces each check cell (announce.py); `masked`: folders the sandbox hides
    (`sandbox.Layout.masked`)."""
    if limits.sandbox:
        cmd, env = _sandboxed(
            notebook, limits, private, token, dict(variables or {}), dict(sockets or {}), masked
        )
    else:
        cmd, env = _unsandboxed(
            notebook, limits, private, token, dict(variables or {}), dict(sockets or {})
        )
    if announce_fd is not None:  # before the notebook, pytest's last word
        cmd[-1:-1] = ["--course-announce-fd", str(announce_fd)]
    return cmd, env


def pytest_command(notebook: str, record: str, ini: str, cell_timeout: float) -> list[str]:
    """pytest --nbval on `notebook`, with the record, kernel-watch and announcing plugins;
    paths as the run sees them."""
    plugins = [arg for name in PLUGINS for arg in ("-p", name)]
    return [
        sys.executable,
        "-m",
        "pytest",
        *plugins,
        "-p",
        "no:cacheprovider",
        "-c",
        ini,
        "--rootdir",
        os.path.dirname(notebook),
        "-o",
        "addopts=",
        "-q",
        "--tb=line",
        "--color=no",
        "--nbval",
        "--nbval-current-env",
        f"--nbval-cell-timeout={cell_timeout:g}",
        "--course-record",
        record,
        notebook,
    ]


def _unsandboxed(
    notebook: Path, limits: Limits, private: Path, token: str, variables: dict, sockets: dict
):
    """Command and environment of a run as the grader's user."""
    (notebook.parent / "tmp").mkdir(exist_ok=True)
    cmd = pytest_command(
        str(notebook), str(private / RECORD), str(private / INI), limits.cell_timeout
    )
    env = {
        **os.environ,
        **variables,
        **{name: str(path) for name, path in sockets.items()},
        "HOME": str(notebook.parent),
        "TMPDIR": str(notebook.parent / "tmp"),
        # its own build folder: runs side by side (-j) never build into the same one
        "COURSE_BUILD_DIR": str(notebook.parent / "build"),
        **sandbox.run_variables(token, limits.threads),
    }
    return cmd, env


def _sandboxed(
    notebook: Path,
    limits: Limits,
    private: Path,
    token: str,
    variables: dict,
    sockets: dict,
    masked: tuple = (),
):
    """Command and environment of a run in the sandbox: the notebook and pytest.ini are shown
    read-only; the record is the host file it writes; each socket's folder, which holds that
    socket alone, is shown read-only in RUN_DIR: the socket may appear after the run starts (a
    judge that listens while the kernel starts), and the run can connect to it but can neither
    remove nor replace it."""
    home, run = sandbox.HOME, sandbox.RUN_DIR
    doors = {name: f"{run}/{name.lower()}" for name in sockets}
    inside = {name: f"{doors[name]}/{Path(path).name}" for name, path in sockets.items()}
    files = [
        (str(notebook), f"{home}/{notebook.name}"),
        (str(private / INI), f"{run}/{INI}"),
        *sandbox.identity_files(private),
        *((str(Path(path).parent), doors[name]) for name, path in sockets.items()),
    ]
    read_only, links = sandbox.visible_paths()
    layout = sandbox.Layout(
        read_only=tuple(read_only),
        symlinks=tuple(links),
        files=tuple(files),
        writable=((str(private / RECORD), f"{run}/{RECORD}"),),
        env={
            **variables,
            **inside,
            **sandbox.sandbox_env(token, limits.threads),
        },
        max_disk=limits.max_disk,
        masked=masked,
    )
    limit = sandbox.limit_command(
        limits.max_procs,
        limits.max_memory,
        limits.max_file_size,
        limits.cpu_time,
        shutil.which("prlimit") or "prlimit",
    )
    pytest = pytest_command(
        f"{home}/{notebook.name}", f"{run}/{RECORD}", f"{run}/{INI}", limits.cell_timeout
    )
    cmd = sandbox.bwrap_command(layout, limit + pytest, sandbox.find_bwrap() or "bwrap")
    return cmd, dict(os.environ, **{sandbox.TOKEN: token})
