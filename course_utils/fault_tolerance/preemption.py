"""Stop cleanly when the scheduler says so: a signal flag checked between steps, and requeue.

Slurm warns a job before its time limit (`#SBATCH --signal=B:USR1@120`) and sends SIGTERM when it
preempts or cancels it. A signal handler must not save a checkpoint itself (it can interrupt the
optimizer halfway through a step); it only sets a flag, and the training loop checks the flag
between steps, saves a consistent checkpoint, requeues the job and exits. Taught in lesson 06.
"""

from __future__ import annotations

import os
import signal

import torch
import torch.distributed as dist

from course_utils import distributed, processes

DEFAULT_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)


class PreemptionFlag:
    """Context manager: while active, the given signals set `.signal` (the first one to arrive)
    instead of killing us."""

    def __init__(self, signals=DEFAULT_SIGNALS):
        self.signals = tuple(signals)
        self.signal: int | None = None
        self._previous = {}

    def _handle(self, signum, frame):
        # The first signal is the reason to stop. `scontrol requeue` itself makes Slurm send
        # SIGTERM while we are still stopping; it must not rename the cause in the log.
        if self.signal is None:
            self.signal = signum

    def __enter__(self) -> PreemptionFlag:
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    @property
    def requested(self) -> bool:
        """True once one of the signals arrived (this process only)."""
        return self.signal is not None

    def should_stop(self) -> bool:
        """True when any rank got a signal: ranks agree, so they all save and stop at one step."""
        if not distributed.is_initialized():
            return self.requested
        flag = torch.tensor([int(self.requested)], device=distributed.collective_device())
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    @property
    def name(self) -> str:
        return signal.Signals(self.signal).name if self.signal is not None else "none"


def requeue_job(environ=None) -> bool:
    """Under Slurm, `scontrol requeue $SLURM_JOB_ID` (rank 0 only); False outside Slurm.

    The job goes back to the queue and restarts from its batch script with SLURM_RESTART_COUNT
    increased; it needs `#SBATCH --requeue` (or the site's default JobRequeue=1).
    """
    environ = os.environ if environ is None else environ
    job_id = environ.get("SLURM_JOB_ID")
    if not job_id:
        return False
    if not distributed.is_main_process():
        return True  # rank 0 requeues the job for all ranks
    done = processes.run(["scontrol", "requeue", job_id], timeout=60)
    if not done.ok:
        raise RuntimeError(
            f"scontrol requeue {job_id} failed ({done.describe()}): {done.stderr.strip()}; "
            "does the job have #SBATCH --requeue?"
        )
    return True
