"""course_utils.failing.shm: the shared memory a DataLoader needs, the route to a small /dev/shm,
and the recorded runs the lesson shows (tests/integration/test_failures_memory_runs.py provokes
it)."""

import re

import pytest

from course_utils.failing import shm


def test_loader_shm_bytes_counts_the_batches_on_order_and_the_one_in_use():
    assert shm.loader_shm_bytes(3 * 2**20, workers=4) == 9 * 3 * 2**20  # 2 per worker + 1
    assert shm.loader_shm_bytes(100, workers=2, prefetch_factor=4) == 900
    assert shm.loader_shm_bytes(100, workers=0) == 0  # no workers: no shared memory
    with pytest.raises(ValueError, match=r"prefetch_factor=0.*need workers >= 0, prefetch"):
        shm.loader_shm_bytes(100, workers=2, prefetch_factor=0)


def test_small_shm_prefix_prefers_bubblewrap_then_unshare_as_root(monkeypatch):
    tools = {"bwrap": "/usr/bin/bwrap", "unshare": "/usr/bin/unshare"}
    monkeypatch.setattr(shm.shutil, "which", lambda name: tools.get(name))
    prefix, route = shm.small_shm_prefix(2**20)
    assert prefix[:1] == ["bwrap"] and ["--size", str(2**20), "--tmpfs", "/dev/shm"] == prefix[4:8]
    assert route == "bubblewrap: a private tmpfs of 1024 KiB on /dev/shm"
    del tools["bwrap"]
    monkeypatch.setattr(shm.os, "geteuid", lambda: 0)
    prefix, route = shm.small_shm_prefix(2**20)
    assert prefix[:2] == ["unshare", "--mount"] and "size=1048576" in prefix[6]
    monkeypatch.setattr(shm.os, "geteuid", lambda: 1000)
    assert shm.small_shm_prefix(2**20) == (
        None,
        "no bubblewrap, and unshare -m needs root: no private /dev/shm can be made here",
    )


def test_shm_error_finds_either_releases_words():
    assert shm.shm_error("x\nRuntimeError: unable to allocate shared memory(shm) for file <a>\n")
    bus = "RuntimeError: DataLoader worker (pid 5) is killed by signal: Bus error. It is ..."
    assert shm.shm_error(f"a\n{bus}\nb") == bus
    assert shm.shm_error("finished: 2 batches") is None


def test_the_recorded_runs_show_the_bus_error_and_the_clear_error():
    runs = shm.recorded()["runs"]
    by_release = {(r["torch"].split("+")[0], r["batch_size"]): r for r in runs}
    old, new = by_release[("2.6.0", 512)], by_release[("2.14.1", 512)]
    assert "killed by signal: Bus error" in old["output"] and old["returncode"] == 1
    assert "unable to allocate shared memory(shm)" in new["output"] and new["returncode"] == 1
    for release in ("2.6.0", "2.14.1"):
        small = by_release[(release, 64)]
        assert small["returncode"] == 0 and "finished: 2 batches" in small["output"]
    assert not any(re.search(r"/work/|/tmp/|/root/", r["output"]) for r in runs)
