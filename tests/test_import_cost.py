"""course_utils.import_cost: the child's own clock, evicting a folder's cached pages, records."""

import sys
from pathlib import Path

import pytest

from course_utils import import_cost, processes

PYTHON = Path(sys.executable).name  # fake_commands matches a program by its name


def test_import_seconds_reads_the_childs_clock(fake_commands):
    fake = fake_commands({PYTHON: "2.5 81920 4242\n"})
    assert import_cost.import_seconds("torch") == {"seconds": 2.5, "read_bytes": 81920, "pid": 4242}
    command = fake.calls[0]
    assert "import torch" in command[-1] and "perf_counter" in command[-1]
    assert "/proc/self/io" in command[-1]  # the bytes the child read from storage


def test_a_failed_import_names_the_interpreter_and_its_error(fake_commands):
    failed = processes.Finished(
        (sys.executable,), 1, "", "ModuleNotFoundError: No module named 'torch'", 0.1
    )
    fake_commands({PYTHON: failed})
    with pytest.raises(RuntimeError, match="No module named 'torch'"):
        import_cost.import_seconds("torch")


def test_evict_counts_pages_in_the_cache_not_file_sizes(tmp_path, monkeypatch):
    (tmp_path / "a.so").write_bytes(b"x" * 5000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_bytes(b"y" * 300)
    (tmp_path / "broken").symlink_to(tmp_path / "missing")
    assert import_cost.resident(str(tmp_path / "broken")) == 0
    # what mincore says is cached: a.so's first page before, none after (b.py never was)
    cached = {str(tmp_path / "a.so"): [4096, 0], str(tmp_path / "sub" / "b.py"): [0, 0]}
    monkeypatch.setattr(import_cost, "resident", lambda path: cached.get(path, [0, 0]).pop(0))
    assert import_cost.evict([tmp_path]) == {
        "resident_before": 4096,
        "evicted_bytes": 4096,
        "resident_after": 0,
    }


def test_evict_says_it_cannot_tell_where_the_cache_is_hidden(tmp_path, monkeypatch):
    """A course environment another user installed: mincore reports every page as cached (Linux
    hides the page cache of files the caller may not write), so what was dropped is unknown."""
    (tmp_path / "a.so").write_bytes(b"x" * 5000)
    monkeypatch.setattr(import_cost, "resident", lambda path: 8192)  # all of it, always
    monkeypatch.setattr(import_cost.os, "access", lambda path, mode: False)
    assert import_cost.evict([tmp_path])["evicted_bytes"] is None
    monkeypatch.setattr(import_cost.os, "access", lambda path, mode: True)
    assert import_cost.evict([tmp_path])["evicted_bytes"] == 0


def test_sample_states_and_summary(fake_commands, monkeypatch):
    fake_commands({PYTHON: "2.0 0 7\n"})
    dropped = {"resident_before": 150, "evicted_bytes": 123, "resident_after": 27}
    monkeypatch.setattr(import_cost, "evict", lambda roots: dropped)
    cold, warm = import_cost.sample("cold"), import_cost.sample("warm")
    assert (cold["state"], cold["evicted_bytes"], warm["evicted_bytes"]) == ("cold", 123, 0)
    assert cold["resident_after"] == 27 and "resident_after" not in warm
    measured = import_cost.records([cold, warm])
    assert measured["python"] == sys.executable and measured["filesystem"] != ""
    assert import_cost.summary(measured) == {"cold": 2.0, "warm": 2.0}
    with pytest.raises(ValueError, match="state 'hot' must be 'cold' or 'warm'"):
        import_cost.sample("hot")


def test_records_round_trip(tmp_path):
    path = import_cost.save({"samples": [], "module": "torch"}, tmp_path / "runs" / "r.json")
    assert import_cost.load(path) == {"samples": [], "module": "torch"}


def test_package_dir_of_a_missing_module_says_so():
    with pytest.raises(ValueError, match="'no_such_module' is not an installed package"):
        import_cost.package_dir("no_such_module")
