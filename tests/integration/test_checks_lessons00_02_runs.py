"""Exercises 00.4 and 02.3 checked for real: fresh Pythons that import torch, DataLoader workers.

Both checks start processes (the imports; the workers fork), hence integration tests. The fast
lane tests the same verdicts on canned records (tests/grading/checks/test_lesson00.py, 02).
"""

import sys
import time

from course_utils import data, import_cost
from course_utils.grading import run_check


def measure_import_cost(path):
    samples = [import_cost.sample("cold")] + [import_cost.sample("warm") for _ in range(2)]
    import_cost.save(import_cost.records(samples), path)


def test_import_cost_measured_in_fresh_processes_passes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = run_check("00.4", measure_import_cost)
    assert done.passed, done.message
    measured = import_cost.load(tmp_path / "runs" / "import_cost.json")
    assert measured["python"] == sys.executable
    assert {"cold", "warm"} == set(import_cost.summary(measured))


def test_import_cost_timed_in_this_process_fails(tmp_path, monkeypatch):
    def in_this_process(path):  # torch is imported here already: the import costs nothing
        samples = []
        for state in ("cold", "warm", "warm"):
            start = time.perf_counter()
            import torch  # noqa: F401

            seconds = time.perf_counter() - start
            samples.append({"state": state, "evicted_bytes": 1, "seconds": seconds, "pid": state})
        import_cost.save(import_cost.records(samples), path)

    monkeypatch.chdir(tmp_path)
    done = run_check("00.4", in_this_process)
    assert done.verdict == "failed"
    assert "each import in a fresh process of its own" in done.message


def loader_rates(dataset, batch_size):
    return data.loader_rates(dataset, batch_size)


def test_loader_rates_measured_with_workers_pass():
    done = run_check("02.3", loader_rates)
    assert done.passed, done.message
    assert done.message.startswith("0 workers up to the allocated CPUs measured")


def test_loader_rates_without_the_workers_they_name_fail():
    def main_process_only(dataset, batch_size):  # names workers, reads in the main process
        rates = data.loader_rates(dataset, batch_size, workers=[0])
        return {**rates, 1: rates[0]}

    done = run_check("02.3", main_process_only)
    assert done.verdict == "failed"
    assert "the data set read in full for each of the 2 settings" in done.message
