"""The installed `course` command, run as a learner or instructor would: a fresh process."""

import json
import subprocess
import sys
from pathlib import Path

from course_utils.paths import REPO_ROOT as ROOT

COURSE = str(Path(sys.executable).parent / "course")


def test_unknown_command_fails_with_usage():
    done = subprocess.run([COURSE, "frobnicate"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "invalid choice: 'frobnicate'" in done.stderr


def test_course_release_check_from_installed_command():
    """`course release --check` works through the console script, from the repository root."""
    course = Path(sys.executable).parent / "course"
    done = subprocess.run(
        [str(course), "release", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "up to date" in done.stdout


def test_json_from_the_installed_command():
    done = subprocess.run(
        [COURSE, "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"SLURM_CPUS_PER_TASK": "1", "PATH": "/usr/bin:/bin"},
    )
    rows = json.loads(done.stdout)
    threads = next(r for r in rows if r["topic"] == "cpu threads")
    assert threads["value"].startswith("allocated CPUs 1")
    assert done.returncode == (1 if any(r["status"] == "error" for r in rows) else 0)
