"""course_utils.import_cost: the child's own clock, evicting a folder's cached pages, records."""

import sys
from pathlib import Path

import pytest

from course_utils import import_cost, processes

PYTHON = Path(sys.executable).name  # fake_commands matches a program by its name


def test_import_seconds_reads_the_childs_clock(fake_commands):
    fake = fake_commands({PYTHON: "2.5\n4242\n"})
    assert import_cost.import_seconds("torch") == {"seconds": 2.5, "pid": 4242}
    command = fake.calls[0]
    assert "import torch" in command[-1] and "perf_counter" in command[-1]


def test_a_failed_import_names_the_interpreter_and_its_error(fake_commands):
    failed = processes.Finished(
        (sys.executable,), 1, "", "ModuleNotFoundError: No module named 'torch'", 0.1
    )
    fake_commands({PYTHON: failed})
    with pytest.raises(RuntimeError, match="No module named 'torch'"):
        import_cost.import_seconds("torch")


def test_evict_counts_the_bytes_of_every_file(tmp_path):
    (tmp_path / "a.so").write_bytes(b"x" * 5000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_bytes(b"y" * 300)
    (tmp_path / "broken").symlink_to(tmp_path / "missing")
    assert import_cost.evict(tmp_path) == 5300


def test_sample_states_and_summary(fake_commands, monkeypatch):
    fake_commands({PYTHON: "2.0\n7\n"})
    monkeypatch.setattr(import_cost, "evict", lambda root: 123)
    cold, warm = import_cost.sample("cold"), import_cost.sample("warm")
    assert (cold["state"], cold["evicted_bytes"], warm["evicted_bytes"]) == ("cold", 123, 0)
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
