"""course_utils.failing.job_memory: a job's memory limit, what a process tree holds, what Slurm and
the kernel write when they kill a step. No process is started here (tests/integration/
test_failures_memory_runs.py runs loaders with workers)."""

import mmap

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from course_utils.failing import job_memory

# What the course's test cluster printed (docs/test-cluster.md), and the kernel's log of that job.
SLURM_OOM = """\
main process (pid 18829): 4 DataLoader workers read images.npy, 256 MiB of images, each opening it with --open copy
memory limit of this job step (its cgroup): 1024 MiB
worker 0 (pid 18846): started
worker 1 (pid 18847): started
slurmstepd-cn1: error: Detected 2 oom-kill event(s) in StepId=64.0. Some of your processes may have been killed by the cgroup out-of-memory handler.
srun: error: cn1: task 0: Out Of Memory
"""  # noqa: E501
KERNEL = (
    "Memory cgroup out of memory: Killed process 18829 (python) total-vm:3545312kB, "
    "anon-rss:287476kB, file-rss:284848kB, shmem-rss:0kB, UID:0 pgtables:1976kB oom_score_adj:0",
    "Memory cgroup out of memory: Killed process 18847 (pt_data_worker) total-vm:3523640kB, "
    "anon-rss:491128kB, file-rss:22140kB, shmem-rss:0kB, UID:0 pgtables:1444kB oom_score_adj:0",
)
# The wording of newer Slurm releases (as users quoted it), and a worker Python saw killed.
WORKER_KILLED = (
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed. \n"
    "slurmstepd: error: Detected 1 oom_kill event in StepId=11300781.0. Some of the step tasks "
    "have been OOM Killed.\n"
)
OLDER = "slurmstepd: error: Detected 2 oom-kill event(s) in step 3756240.batch cgroup.\n"


def test_oom_report_reads_slurms_lines():
    report = job_memory.oom_report(SLURM_OOM)
    assert (report.oom_killed, report.events, report.step) == (True, 2, "64.0")
    assert report.killed_worker is None
    assert report.who().startswith("the step's main process")
    assert report.lines == (
        "slurmstepd-cn1: error: Detected 2 oom-kill event(s) in StepId=64.0. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler.",
        "srun: error: cn1: task 0: Out Of Memory",
    )


def test_oom_report_names_a_worker_python_saw_killed_and_older_slurm_wording():
    report = job_memory.oom_report(WORKER_KILLED)
    assert (report.oom_killed, report.events, report.step) == (True, 1, "11300781.0")
    assert report.who() == "a DataLoader worker (pid 4242)"
    older = job_memory.oom_report(OLDER)
    assert (older.oom_killed, older.events, older.step) == (True, 2, "3756240.batch")


def test_a_job_that_fit_has_no_oom_report():
    report = job_memory.oom_report("finished: 8 batches, checksum 1\n")
    assert not report.oom_killed and report.lines == ()
    assert report.who() == "no process was killed for memory"


def test_killed_roles_names_the_kernels_pids_by_what_the_program_printed():
    assert job_memory.killed_roles(SLURM_OOM, KERNEL) == [
        "main process (pid 18829)",
        "worker 1 (pid 18847)",
    ]
    assert job_memory.killed_roles("", KERNEL[:1]) == ["pid 18829 (python)"]


def _cgroup_v1(root, path, limits):
    for depth, limit in limits.items():
        folder = root / "memory" / "/".join(path.split("/")[1 : depth + 1])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "memory.limit_in_bytes").write_text(f"{limit}\n")


def test_memory_limit_reads_the_tightest_cgroup_v1_limit_above_the_process(tmp_path):
    path = "/slurm_cn1/uid_0/job_64/step_0/task_0"
    _cgroup_v1(tmp_path, path, {0: 2**63 - 4096, 3: 2**30, 4: 2**31, 5: 9223372036854771712})
    text = f"9:name=systemd:/\n4:memory:{path}\n3:cpuset:/\n"
    assert job_memory.memory_limit(text, root=str(tmp_path)) == 2**30


def test_memory_limit_v2_and_none(tmp_path):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "memory.max").write_text("536870912\n")
    (tmp_path / "memory.max").write_text("max\n")
    assert job_memory.memory_limit("0::/job\n", root=str(tmp_path)) == 512 * 2**20
    assert job_memory.memory_limit("0::/\n", root=str(tmp_path)) is None
    assert job_memory.memory_limit("4:memory:/\n", root=str(tmp_path)) is None  # no files


def test_rollup_reads_smaps_rollup_in_bytes():
    text = "Rss:  571184 kB\nPss_Anon:  286596 kB\nPrivate_Dirty:  286596 kB\n"
    assert job_memory.rollup(text) == {
        "Rss": 571184 * 1024,
        "Pss_Anon": 286596 * 1024,
        "Private_Dirty": 286596 * 1024,
    }


def test_tree_memory_of_this_process_counts_memory_it_writes():
    """64 MiB of fresh anonymous pages, written: private and dirty. Mapped here rather than
    taken from malloc, which may hand back pages an earlier test in this process dirtied."""
    before = job_memory.tree_memory()[0]
    block = mmap.mmap(-1, 64 * 2**20)
    np.frombuffer(block, dtype=np.uint8)[:] = 1
    after = job_memory.tree_memory()[0]
    assert after.unshared - before.unshared > 60 * 2**20
    assert after.held - before.held > 60 * 2**20
    block.close()


def test_write_images_is_deterministic_and_sized(tmp_path):
    a = job_memory.write_images(tmp_path / "a.npy", 2)
    b = job_memory.write_images(tmp_path / "b.npy", 2)
    images = np.load(a)
    assert images.shape == (2 * 2**20 // 3072, 3, 32, 32) and images.dtype == np.uint8
    assert np.array_equal(images, np.load(b)) and images.std() > 50
    big = np.load(job_memory.write_images(tmp_path / "c.npy", 1, shape=(3, 64, 64)))
    assert big.shape == (85, 3, 64, 64)
    with pytest.raises(ValueError, match=r"mib=0: the file needs at least 1 MiB"):
        job_memory.write_images(tmp_path / "d.npy", 0)


@pytest.mark.parametrize("mmap", [False, True])
def test_image_file_gives_the_files_images_either_way(tmp_path, mmap):
    path = job_memory.write_images(tmp_path / "images.npy", 1)
    dataset = job_memory.ImageFile(path, mmap=mmap)
    assert dataset.images is None  # opened by whichever process reads first
    assert torch.equal(dataset[5], torch.from_numpy(np.load(path)[5]))
    assert isinstance(dataset.images, np.memmap) == mmap


def test_read_loader_sums_what_it_read_and_measures_once(tmp_path):
    path = job_memory.write_images(tmp_path / "images.npy", 1)
    loader = DataLoader(job_memory.ImageFile(path, mmap=True), batch_size=100)  # no workers
    seen = []
    run = job_memory.read_loader(loader, on_batch=lambda b: seen.append(len(b)))
    assert run.batches == len(loader) == len(seen) and sum(seen) == len(loader.dataset)
    assert run.checksum == int(np.load(path).sum(dtype=np.int64))
    assert len(run.held) == 1 and run.workers == []
