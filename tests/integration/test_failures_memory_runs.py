"""Lesson 09's host-memory failures, run for real on this machine: DataLoader workers that copy
or share a file (the program and the 09.5 checker, whose workers are real forked processes),
and a loader in a /dev/shm too small for its batches (bubblewrap)."""

import re
import sys

import nbformat
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from course_utils import processes
from course_utils.failing import failures, job_memory, shm
from course_utils.grading import NOT_ATTEMPTED, run_check
from course_utils.grading.checks import lesson09
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT


@pytest.fixture(autouse=True)
def no_process_left_behind():
    yield
    assert [p.cmdline() for p in failures.leftover_processes()] == []


def _solution():
    nb = nbformat.read(REPO_ROOT / "solutions" / "09_when_jobs_fail.ipynb", as_version=4)
    cell = next(c for c in nb.cells if course_meta(c).get("exercise") == "09.5")
    namespace = {"job_memory": job_memory, "DataLoader": DataLoader}
    exec(cell.source, namespace)
    return namespace["shared_loader"], namespace["workers_memory"]


def workers_memory(loader):
    run = job_memory.read_loader(loader)
    return {"own_mib": [p.unshared / 2**20 for p in run.workers], "checksum": run.checksum}


def test_09_5_passes_the_solution_and_loading_once_before_the_fork():
    assert run_check("09.5", *_solution()).passed

    def loaded_in_the_main_process(path, workers):  # forked workers share its pages
        return DataLoader(torch.from_numpy(np.load(path)), batch_size=128, num_workers=workers)

    assert run_check("09.5", loaded_in_the_main_process, workers_memory).passed


def test_09_5_fails_workers_that_each_copy_the_file():
    def each_worker_reads_it(path, workers):
        return DataLoader(job_memory.ImageFile(path), batch_size=256, num_workers=workers)

    result = run_check("09.5", each_worker_reads_it, workers_memory)
    assert result.verdict == "failed"
    assert re.match(
        r"2 workers on a 64 MiB file: expected each worker holding about what the check's own "
        r"sharing loader's workers held \(under 16 MiB more\), got \[\d+, \d+\] MiB: each worker "
        r"holds a copy of the 64 MiB file\. Map it",
        result.message,
    ), result.message


def test_09_5_fails_no_workers_images_changed_a_partial_reading_and_a_stub():
    shared, _ = _solution()

    def no_workers(path, workers):
        return DataLoader(job_memory.ImageFile(path, mmap=True), batch_size=256)

    assert run_check("09.5", no_workers, workers_memory).message == (
        "the loader's processes while it read: expected 2 workers reading, got 0"
    )

    def scaled(path, workers):
        images = torch.from_numpy(np.load(path, mmap_mode="r")[:512].copy()).float() / 255
        return DataLoader(images, batch_size=256, num_workers=workers)

    assert run_check("09.5", scaled, workers_memory).message == (
        "the reading: expected one whole epoch of the file's images as stored (uint8, 3 x 64 x "
        "64), got 2 of 2 batches, with other values"
    )

    def eight_batches(loader):
        run = job_memory.read_loader(loader, 8)
        return {"own_mib": [p.unshared / 2**20 for p in run.workers], "checksum": run.checksum}

    assert run_check("09.5", shared, eight_batches).message.startswith(
        "the reading: expected one whole epoch of the file's images as stored (uint8, 3 x 64 x "
        "64), got 8 of 22 batches"
    )

    def stub(*args):
        raise NotImplementedError("Exercise 09.5")

    assert run_check("09.5", stub, workers_memory).verdict == NOT_ATTEMPTED
    assert run_check("09.5", shared, stub).verdict == NOT_ATTEMPTED
    assert lesson09.SHARED_LOADER_WORKERS == 2


def test_09_5_a_typed_in_or_unmeasured_reading_earns_nothing():
    shared, _ = _solution()
    missing = run_check("09.5", shared, lambda loader: None)
    assert missing.verdict == NOT_ATTEMPTED and "run your loader first" in missing.message

    def typed_in(loader):  # figures typed in, the checksum from the file, no reading
        total = int(np.load(loader.dataset.path).sum(dtype=np.int64))
        return {"own_mib": [9.0, 9.0], "checksum": total}

    typed = run_check("09.5", shared, typed_in)
    assert typed.verdict == "failed"
    assert typed.message.startswith(
        "expected your loader read by job_memory.read_loader (the course's measurement)"
    )

    def figures_of_its_own(loader):  # a real reading, other figures reported
        run = job_memory.read_loader(loader)
        return {"own_mib": [1.0, 1.0], "checksum": run.checksum}

    own = run_check("09.5", shared, figures_of_its_own)
    assert own.message.startswith("'own_mib': expected what read_loader measured, [")


def test_the_program_copies_per_worker_or_shares_and_says_so(tmp_path):
    images = job_memory.write_images(tmp_path / "images.npy", 64)
    held = {}
    for how in ("copy", "mmap"):
        done = processes.run(
            [
                sys.executable,
                "-m",
                "course_utils.jobs.loader_memory",
                "--data",
                images,
                "--open",
                how,
                "--workers",
                "2",
            ],
            timeout=120,
            merge=True,
        )
        assert done.ok, done.stdout
        assert len(re.findall(r"^worker \d \(pid \d+\): started$", done.stdout, re.M)) == 2
        assert "finished: 4 batches" in done.stdout
        own = re.search(r"each worker's own: (\d+), (\d+) MiB", done.stdout)
        held[how] = [int(own[1]), int(own[2])]
    assert min(held["copy"]) >= 64 > 32 > max(held["mmap"]), held


@pytest.mark.bwrap
def test_a_small_dev_shm_fails_the_big_batches_and_fits_the_small(tmp_path):
    images = job_memory.write_images(tmp_path / "images.npy", 4)
    route, (big, small) = shm.provoke(images, size=2**20)
    assert route.startswith(("bubblewrap", "unshare -m"))
    assert big.returncode == 1 and big.needs > 2**20, big.output
    assert re.search(r"unable to allocate shared memory|Bus error", big.error), big.output
    assert small.returncode == 0 and small.needs < 2**20 and small.error is None, small.output
