"""Submit the course's real Slurm scripts from tests and read what the jobs printed.

    from slurm_utils import submit_and_wait   # tests/integration is on sys.path under pytest
    result = submit_and_wait("slurm/cpu_job.sh", "--epochs", "1", env={"COURSE_DEVICE": "cpu"})
    assert result.returncode == 0, result.output

Jobs run from the repository root (the scripts source slurm/config.sh from SLURM_SUBMIT_DIR) and
write their output to a file of their own; `sbatch --wait` returns the job's exit code, which is
what tests rely on (this cluster keeps no accounting database, so there is no sacct).
`submit` starts a job and returns at once, so several jobs can run while a test waits for one.
Mark such tests `slurm`: tests/conftest.py skips them (or, in CI, fails them) when no cluster
answers. A local cluster for this: `.ci/slurm-cluster.sh start` (CI starts it before `make test`).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from course_utils.paths import REPO_ROOT as REPO


@dataclass(frozen=True)
class JobResult:
    returncode: int  # the job's exit code (sbatch --wait), or -1 after a timeout
    output: str  # the job's output file (stdout and stderr)
    seconds: float


class Job:
    """A submitted `sbatch --wait` job; `wait()` gives its JobResult."""

    def __init__(self, script, *args, env=None, sbatch_args=(), output_dir=None, cwd=REPO):
        folder = Path(output_dir or tempfile.mkdtemp(prefix="slurm-test-"))
        self.output_path = folder / f"{Path(script).stem}-{time.monotonic_ns()}.out"
        cmd = ["sbatch", "--wait", f"--output={self.output_path}", *sbatch_args, str(script)]
        cmd += [str(a) for a in args]
        self.start = time.perf_counter()
        self._proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    @property
    def job_id(self) -> str | None:
        """The id sbatch printed, once it has ("Submitted batch job N")."""
        return getattr(self, "_job_id", None)

    def wait(self, timeout: float = 120) -> JobResult:
        """Wait for the job; on timeout cancel it and return returncode -1."""
        try:
            submit_text, _ = self._proc.communicate(timeout=timeout)
            code = self._proc.returncode
        except subprocess.TimeoutExpired:
            self._proc.kill()
            submit_text, _ = self._proc.communicate()
            code = -1
        m = re.search(r"Submitted batch job (\d+)", submit_text or "")
        self._job_id = m.group(1) if m else None
        if code == -1 and self._job_id:
            subprocess.run(["scancel", self._job_id], check=False)
        text = self.output_path.read_text() if self.output_path.exists() else ""
        if not m:  # sbatch itself refused the job: its message is the output
            text = submit_text + text
        return JobResult(code, text, time.perf_counter() - self.start)


def submit(script, *args, env=None, sbatch_args=(), output_dir=None, cwd=REPO) -> Job:
    """Start `sbatch --wait script args...` from `cwd` (the repository root unless a test
    submits from a learner's own folder); returns at once."""
    return Job(script, *args, env=env, sbatch_args=sbatch_args, output_dir=output_dir, cwd=cwd)


def submit_and_wait(
    script, *args, env=None, sbatch_args=(), timeout=120, output_dir=None
) -> JobResult:
    """Submit `script` with `args`, wait until it ends; returns exit code, output text, seconds.

    env: variables added to the submitting environment (sbatch exports it into the job).
    sbatch_args: options for sbatch itself, e.g. ["--nodes=1"]; they override #SBATCH lines.
    """
    job = submit(script, *args, env=env, sbatch_args=sbatch_args, output_dir=output_dir)
    return job.wait(timeout)


def submit_detached(script, *args, env=None, sbatch_args=(), output_dir=None) -> tuple[str, Path]:
    """Submit without waiting (for servers such as the Jupyter job); returns (job id, output)."""
    folder = Path(output_dir or tempfile.mkdtemp(prefix="slurm-test-"))
    output = folder / f"{Path(script).stem}-{time.monotonic_ns()}.out"
    out = subprocess.run(
        ["sbatch", "--parsable", f"--output={output}", *sbatch_args, str(script), *map(str, args)],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().split(";")[0], output


def wait_for_text(path: Path, pattern: str, timeout: float = 60) -> re.Match:
    """Poll a job's output file until `pattern` (a regex) appears; TimeoutError otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        m = re.search(pattern, text)
        if m:
            return m
        time.sleep(0.5)
    raise TimeoutError(f"{pattern!r} did not appear in {path} within {timeout} s:\n{text[-2000:]}")


def cancel(job_id: str) -> None:
    subprocess.run(["scancel", job_id], check=False)
