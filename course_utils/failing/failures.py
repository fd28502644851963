"""When jobs fail: provoke a failure for real, bounded by timeouts, and read what it left.

`provoke` runs `course_utils.jobs.faulty_ddp` under torchrun with one fault and returns a
`FailureRun`: the launch's whole output, the truth the program recorded (which rank it made
fail, and how), and, for a hang, every rank's Python stack taken with py-spy while it hung.
`provoke_all` runs several side by side (most of a failure is waiting for a timeout).
`batch_script_problems` reads a batch script as sbatch and srun will; `leftover_processes` says
whether anything was left behind. A healthy faulty_ddp run trains: each rank on batches of its
own (`batch_seed`), and every rank ends by printing the same `parameter_sum` (exercise 09.3).
A function on forked gloo ranks: `launching.run_ranks`.
Taught in lesson 09, with `stacks` (py-spy), `flight_recorder` and `memory`.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from course_utils import distributed, rank_logs, sbatch
from course_utils.failing.stacks import stacks_of_stuck_ranks
from course_utils.files import atomic_write_text
from course_utils.paths import REFERENCE_DIR

# What each fault of faulty_ddp does to its rank, in the words a diagnosis uses.
CAUSES = {
    "never-joins": "never joined",  # stuck before init_process_group
    "hang": "hung",  # stuck before a collective the others wait in
    "mismatch": "mismatch",  # a different collective (or shape) from the others
    "oom": "out of memory",  # an allocation that cannot fit
}
IMPOSSIBLE_ROWS = 2**56  # x 16 float32 = 4 EiB: more than any address space, so refused at once
# even where the kernel overcommits memory (16 TiB could be granted there, then filled).
PROGRAM = "course_utils.jobs.faulty_ddp"
LEARNING_RATE = 0.1  # faulty_ddp's SGD step
# The course's own runs of every fault on rank 0 and on rank 1, each log with its truth (package
# data; re-recorded by grading/checks/lesson09_references.py's record_runs): lesson 09 reads them.
RECORDED_RUNS = REFERENCE_DIR / "failure_runs"
RECORDED_FAULTS = [(fault, rank) for fault in CAUSES for rank in (0, 1)]


def batch_seed(seed: int, step: int, rank: int) -> int:
    """The seed of rank `rank`'s batch in step `step` of a faulty_ddp run at `seed`: each rank
    reads data of its own, as a DistributedSampler would give it."""
    return (seed * 1_000 + step) * 1_000 + rank


@dataclass(frozen=True)
class FailureRun:
    """One provoked failure: what the launch printed, and what really happened."""

    name: str
    output: str
    returncode: int
    seconds: float
    truth: dict
    stacks: dict[int, str] = field(default_factory=dict)  # rank -> py-spy dump, for a hang

    @property
    def faulty_rank(self) -> int:
        return self.truth["rank"]

    @property
    def cause(self) -> str:
        return self.truth["cause"]


def provoke(
    fault: str,
    folder,
    *,
    faulty_rank: int = 1,
    timeout: float = 3.0,
    nproc: int = 2,
    env: dict | None = None,
    take_stacks: bool = False,
    limit: float = 90.0,
) -> FailureRun:
    """Run faulty_ddp under torchrun with `fault` on `faulty_rank`; save and return the run.

    timeout: the job's own limit for joining and for each collective (the fix the lesson
    teaches); limit: the launcher's wall-clock limit, which kills the whole tree if the job's
    own limits did not end it. take_stacks: py-spy every rank once they stop moving.
    """
    if fault not in CAUSES:
        raise ValueError(f"fault {fault!r} is not one of {', '.join(CAUSES)}")
    folder = Path(folder) / fault
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    truth_path = folder / "truth.json"
    args = [
        "--fault",
        fault,
        "--faulty-rank",
        faulty_rank,
        "--timeout",
        timeout,
        "--stall",
        limit,
        "--truth",
        truth_path,
    ]
    env = {"OMP_NUM_THREADS": "1", **(env or {})}
    stacks: dict[int, str] = {}
    launched, looker = threading.Event(), None
    if take_stacks:  # while the launch runs, a thread waits for its ranks to get stuck
        looker = threading.Thread(
            target=lambda: stacks.update(
                stacks_of_stuck_ranks(str(truth_path), nproc, limit, stop=launched)
            ),
            daemon=True,
        )
        looker.start()
    start = time.perf_counter()
    result = distributed.launch(
        PROGRAM, *args, nproc=nproc, env=env, timeout=limit, check=False, echo=False
    )
    seconds = time.perf_counter() - start
    launched.set()
    if looker is not None:
        looker.join(timeout=5)
    atomic_write_text(folder / "output.log", result.output)
    if stacks:
        atomic_write_text(folder / "stacks.json", json.dumps(stacks, indent=1))
    if not truth_path.is_file():
        raise RuntimeError(
            f"{PROGRAM} ended before rank 0 wrote {truth_path}:\n{result.output[-2000:]}"
        )
    truth = json.loads(truth_path.read_text())
    return FailureRun(fault, result.output, result.returncode, seconds, truth, stacks)


def provoke_all(faults: dict[str, dict], folder) -> dict[str, FailureRun]:
    """`provoke` each fault (name -> its keyword arguments) side by side, in threads."""
    with ThreadPoolExecutor(max_workers=max(1, len(faults))) as pool:
        futures = {fault: pool.submit(provoke, fault, folder, **kw) for fault, kw in faults.items()}
    return {fault: future.result() for fault, future in futures.items()}  # raises a failure


def load_runs(folder) -> list[FailureRun]:
    """The runs saved under `folder` (one sub-folder each with output.log and truth.json)."""
    runs = []
    for sub in sorted(p for p in Path(folder).glob("*") if (p / "truth.json").is_file()):
        if not (sub / "output.log").is_file():
            continue
        truth = json.loads((sub / "truth.json").read_text())
        stacks_file = sub / "stacks.json"
        saved = json.loads(stacks_file.read_text()) if stacks_file.is_file() else {}
        stacks = {int(rank): dump for rank, dump in saved.items()}  # JSON keys are strings
        output = (sub / "output.log").read_text()
        runs.append(FailureRun(sub.name, output, -1, 0.0, truth, stacks))
    return runs


def error_lines(output: str) -> dict[int, list[str]]:
    """Each rank's error messages in a torchrun log: the "[rankN]: SomeError: ..." lines."""
    found: dict[int, list[str]] = {}
    for rank, message in re.findall(
        r"^\[rank(\d+)\]:\s*(\w+(?:Error|Exception): .*)$", output, re.M
    ):
        found.setdefault(int(rank), []).append(message)
    return found


def root_cause_rank(output: str) -> int | None:
    """The rank torchrun's summary calls the root cause: the FIRST to exit with an error,
    which in a hang is a rank that waited, not the one that stalled."""
    root = rank_logs.root_cause(output)
    return root[0] if root else None


def exit_codes(output: str) -> dict[int, int]:
    """Each rank's exit code from torchrun's summary (-15: stopped by torchrun's SIGTERM)."""
    pairs = re.findall(r"rank\s*:\s*(\d+) \(local_rank.*\n\s*exitcode\s*:\s*(-?\d+)", output)
    return {int(rank): int(code) for rank, code in pairs}


# --- Leftovers and the environment ------------------------------------------------------------


# multiprocessing's servers, kept for the life of the process that started them: the fork server
# local ranks start from (launching.run_programs, batch.local_run) and its resource tracker
SERVERS = ("multiprocessing.forkserver", "multiprocessing.resource_tracker")


def leftover_processes(parent: psutil.Process | None = None) -> list[psutil.Process]:
    """Live (not zombie) descendants of `parent` (default: this process), except
    multiprocessing's servers (SERVERS): those stay by design, and are not what a launch left."""
    parent = parent or psutil.Process()
    alive = []
    for p in parent.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            command = " ".join(p.cmdline())
            if p.status() != psutil.STATUS_ZOMBIE and not any(s in command for s in SERVERS):
                alive.append(p)
    return alive


# --- Batch scripts that hang: the rules a reader checks ----------------------------------------

# A DDP job that hangs at start-up (lesson 09's exercise): every line looks reasonable.
BROKEN_BATCH_SCRIPT = """\
#!/bin/bash
#SBATCH --job-name=ddp-broken
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
set -euo pipefail
#SBATCH --time=00:05:00
# COURSE_DIR: the course's folder (batch.submit sets it; else submit from there)
source "${COURSE_DIR:-.}/slurm/config.sh"
course_activate
export MASTER_ADDR=$(hostname) MASTER_PORT=29500
export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS
python -m course_utils.jobs.faulty_ddp --timeout 20
"""


def batch_script_problems(script: str) -> list[str]:
    """What makes a DDP batch script hang or misbehave, each with the rule and the fix.
    An empty list: none of the checks found a problem."""
    problems, directives = [], sbatch.parse_header(script)  # what sbatch reads
    lines = script.splitlines()
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        m = re.match(r"#SBATCH\s+(--\S+)", stripped)
        if m and m[1].split("=")[0] not in directives:
            problems.append(
                f"line {number}: '#SBATCH {m[1]}' comes after the first command, so sbatch "
                "ignores it: put every #SBATCH line before the first command"
            )
        if re.match(r"^(exec\s+)?python3?\s", stripped):
            problems.append(
                f"line {number}: the batch script starts python itself, once: it is 1 process, "
                "not one per task; start it with srun (srun python ...)"
            )
        names = re.findall(r"\b(RANK|LOCAL_RANK|WORLD_SIZE)=", stripped)
        if names:
            problems.append(
                f"line {number}: {', '.join(names)} set in the batch script, which is not a "
                "task (SLURM_PROCID and SLURM_LOCALID are 0 there): every task would get the "
                "script's values; drop them and let each task read SLURM_PROCID, "
                "SLURM_LOCALID and SLURM_NTASKS"
            )
        if re.search(r"\bMASTER_PORT=\d+\b", stripped):
            problems.append(
                f"line {number}: a fixed MASTER_PORT collides with any other job on the same "
                "node (EADDRINUSE); derive it from the job id: "
                "MASTER_PORT=$((20000 + SLURM_JOB_ID % 10000)) (course_master does)"
            )
    if "--time" not in directives:
        problems.append(
            "no --time among the #SBATCH lines sbatch reads: the job gets the partition's "
            "default limit (often days), and a hung job holds its nodes until then"
        )
    return problems
