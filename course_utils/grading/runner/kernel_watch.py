"""A pytest plugin for nbval runs: a notebook whose kernel dies fails that cell at once.

nbval 0.11 waits for a cell's reply until --nbval-cell-timeout even when the kernel is already
dead (a segfault, `os._exit`): 126 s with a 120 s limit, measured on the course's machine, and
on the H100 a crashing AOTInductor loader hung a whole run. With this plugin nbval waits in
one-second slices and, once the kernel process is gone, fails the cell with its exit status;
the cells after it fail with nbval's "Kernel dead on test start".

Every pytest run in the repository loads it (the root conftest.py's `pytest_plugins`), so an
instructor's plain `pytest --nbval-lax notebooks/` has it too; a run outside the repository loads
it with `-p course_utils.grading.runner.kernel_watch`, as the runner (commands.py) and `make
test-gpu` do.
"""

from __future__ import annotations

import time
from queue import Empty

from course_utils.processes import exit_description

SLICE = 1.0  # seconds between checks that the kernel is alive


class KernelDied(RuntimeError):
    """The kernel process ended while a cell ran; the message says how."""


def exit_status(kernel) -> str:
    """How the kernel process ended, from its manager: "signal 11 (SIGSEGV)", "exit code 1"."""
    process = getattr(getattr(kernel.km, "provisioner", None), "process", None)
    code = process.poll() if process is not None else None
    return "an unknown status" if code is None else exit_description(code)


def watch(running_kernel_class) -> None:
    """Patch nbval's RunningKernel.await_reply to notice a dead kernel (idempotent)."""
    if getattr(running_kernel_class.await_reply, "_course_watch", False):
        return
    wait = running_kernel_class.await_reply

    def await_reply(self, msg_id, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = SLICE if deadline is None else min(SLICE, deadline - time.monotonic())
            if left <= 0:
                raise Empty  # nbval's own time limit: it interrupts the kernel and says so
            try:
                return wait(self, msg_id, timeout=left)
            except Empty:
                if not self.is_alive():
                    self.course_died = True
                    raise KernelDied(
                        f"the kernel died while running this cell ({exit_status(self)}): a crash "
                        "in native code (segfault, abort), os._exit() or the out-of-memory "
                        "killer; the cells after it cannot run"
                    ) from None

    await_reply._course_watch = True
    running_kernel_class.await_reply = await_reply


def pytest_configure(config):
    try:
        from nbval.kernel import RunningKernel
    except ImportError:  # not an nbval run
        return
    watch(RunningKernel)
