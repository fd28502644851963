"""Fault tests of the resumable training program: kill -9, death mid-save, bad files, signals.

Each compares the final parameter hash with that of an uninterrupted run (same settings, CPU,
one thread), which must match bit for bit.
"""

import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from course_utils import launching, processes
from course_utils.checkpoint import checkpoint_path, latest_checkpoint, list_checkpoints
from course_utils.fault_tolerance.resumable import EX_TEMPFAIL, Config, train

# 5 epochs of 8 steps (256 samples, batch 32); a save every 3 steps, so kills land between saves.
ARGS = ["--epochs", "5", "--max-steps", "40", "--save-every", "3", "--keep-last", "2"]
HASH = re.compile(r"final parameter hash: ([0-9a-f]{16})")
STEP = re.compile(r"step (\d+) ")


def step_of(line: str) -> int:
    """The step a progress line reports ("step 12 epoch 1 loss ..."); -1 for any other line."""
    found = STEP.match(line)
    return int(found[1]) if found else -1


class Payload:
    """Unpickling this would create a marker folder (harmless, detectable)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def config(folder) -> Config:
    return Config(ckpt_dir=str(folder), epochs=5, max_steps=40, save_every=3, keep_last=2)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> str:
    """The uninterrupted run's hash, in this process (same code path as the program)."""
    return train(config(tmp_path_factory.mktemp("reference")), log=lambda msg: None)


def child_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return {**env, "PYTHONUNBUFFERED": "1"}


class Program:
    """The resumable program, forked from the warm server (`launching.start_program`): the
    program's stops and resumes are under test, not how it starts, so no run spends its first
    seconds importing torch. Its output goes to a log beside the checkpoints' folder."""

    def __init__(self, folder, *extra):
        self.log = folder.parent / f"{folder.name}-{time.monotonic_ns()}.log"
        args = ("--ckpt-dir", str(folder), *ARGS, *extra)
        task = launching.Task("course_utils.jobs.resumable_train", args, child_env())
        self.process = launching.start_program(
            task, self.log, preload=("course_utils.fault_tolerance.resumable",)
        )

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def run_until_step(self, step: int, timeout: float = 120) -> list[str]:
        """The program's lines up to the first that reports `step` or a later one. A later one
        counts: between the moment a test reads a step and the moment its signal lands, a
        loaded machine lets the program run on, so the next run may resume past `step`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.output().splitlines()
            reached = [i for i, line in enumerate(lines) if step_of(line) >= step]
            if reached:
                return lines[: reached[0] + 1]
            if not self.process.is_alive():
                break
            time.sleep(0.01)
        raise AssertionError(f"no step {step} in the run's output:\n" + self.output()[-2000:])

    def stop(self, sig: signal.Signals, timeout: float = 60) -> int:
        """Send `sig`; its exit code once it has ended (negative: killed by a signal)."""
        os.kill(self.process.pid, sig)
        self.process.join(timeout)
        processes.kill_session(self.process)
        self.process.join()
        return self.process.exitcode


def finish(folder) -> tuple[str, list[str]]:
    """Resume and complete the run in this process (the program's own code, without the
    seconds a new interpreter spends importing torch); returns the hash and the log lines."""
    lines = []
    return train(config(folder), log=lines.append), lines


def test_kill_9_at_random_steps_then_resume_gives_identical_parameters(tmp_path, reference):
    # Each run is killed a random 4 to 7 steps after where it began, so that it gets past a save
    # (every 3 steps). The steps count from where the run really resumed: a signal lands a little
    # after the step the test read, later still on a loaded machine. The pause per step keeps
    # the last run short of the end (step 40) while the signal is on its way.
    rng = random.Random(1)  # offsets 5, 4, 6, 4, 7: kills land 1, 2 and 0 steps past a save
    resumed_from, killed_at = [], []
    for _ in range(5):
        program = Program(tmp_path, "--step-delay", "0.1")
        first = program.run_until_step(0)
        target = step_of(first[-1]) - 1 + rng.randint(4, 7)
        lines = program.run_until_step(target)
        assert program.stop(signal.SIGKILL) == -signal.SIGKILL  # no cleanup: a node failure
        killed_at.append(step_of(lines[-1]))
        resumed_from += [line for line in lines if "resumed from" in line]
    digest, lines = finish(tmp_path)
    print(f"killed after steps {killed_at}; {resumed_from + lines[:1]}")
    assert len(resumed_from) == 4, "every run after the first resumed rather than starting over"
    assert "resumed from" in lines[0]
    assert digest == reference, f"after kills at {killed_at}: {digest} != {reference}"


def test_killed_during_save_previous_checkpoint_stays_valid_and_is_used(tmp_path, reference):
    # The child dies halfway through writing its second checkpoint (step 6).
    script = textwrap.dedent(f"""
        import io, os, signal, torch
        from course_utils.fault_tolerance.resumable import Config, train
        real_save, calls = torch.save, []
        def half_then_die(obj, f):
            calls.append(1)
            if len(calls) == 2:
                buf = io.BytesIO()
                real_save(obj, buf)
                f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
                f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            real_save(obj, f)
        torch.save = half_then_die
        train(Config(ckpt_dir={str(tmp_path)!r}, epochs=5, max_steps=40, save_every=3, keep_last=2))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=child_env(), timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert "step 6 " in proc.stdout
    assert [p.name for p in list_checkpoints(tmp_path)] == ["ckpt-00000003.pt"]
    assert len(list(tmp_path.glob(".ckpt-00000006.pt.*.tmp"))) == 1, "the half-written temp file"
    digest, lines = finish(tmp_path)
    assert lines[0] == "checkpoint: resumed from ckpt-00000003.pt (epoch 0, step 3)"
    assert digest == reference


@pytest.mark.parametrize("kind", ["truncated", "random bytes", "wrong structure", "malicious"])
def test_unusable_newest_checkpoint_falls_back_to_previous(tmp_path, reference, kind):
    import numpy as np
    import torch

    cfg = config(tmp_path)
    train(cfg, stop_after=10, log=lambda msg: None)  # saves at steps 3, 6, 9 (keeps 6 and 9)
    good = latest_checkpoint(tmp_path)
    bad = checkpoint_path(tmp_path, 10)
    if kind == "truncated":  # what a non-atomic writer leaves after a crash
        bad.write_bytes(good.read_bytes()[:5000])
    elif kind == "random bytes":
        bad.write_bytes(np.random.default_rng(1).bytes(10_000))
    elif kind == "wrong structure":
        torch.save({"weights": torch.zeros(2)}, bad)
    else:
        torch.save(
            {"format": "x", "model": Payload(tmp_path / "PWNED"), "epoch": 0, "step": 0}, bad
        )
    lines = []
    digest = train(cfg, log=lines.append)
    assert "checkpoint: skipping unusable" in lines[0] and bad.name in lines[0]
    assert lines[1] == f"checkpoint: resumed from {good.name} (epoch 1, step 9)"
    assert not (tmp_path / "PWNED").exists(), "no code from the file ran"
    assert digest == reference


def test_sigusr1_then_sigterm_save_and_exit_then_resume_is_exact(tmp_path, reference):
    for sig, at in ((signal.SIGUSR1, 4), (signal.SIGTERM, 12)):
        program = Program(tmp_path, "--step-delay", "0.02")
        program.run_until_step(at)
        code, rest = program.stop(sig), program.output()
        assert code == EX_TEMPFAIL, rest
        pattern = rf"got {sig.name} at step (\d+): checkpoint saved; run again to resume"
        stopped = re.search(pattern, rest)
        assert stopped, rest
        step = int(stopped[1])
        assert latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, step), "saved at that step"
    digest, lines = finish(tmp_path)
    assert lines[0].startswith(f"checkpoint: resumed from ckpt-{step:08d}.pt")
    assert digest == reference
