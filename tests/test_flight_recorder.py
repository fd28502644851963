"""course_utils.failing.flight_recorder: reading records (dumping them needs ranks:
tests/integration)."""

import pickle

import pytest

from course_utils.failing import flight_recorder


def _entry(seq, op, sizes):
    return {
        "collective_seq_id": seq,
        "profiling_name": f"gloo:{op}",
        "input_sizes": sizes,
        "process_group": ("0", "default_pg"),
    }


def test_last_collectives_name_the_missing_rank():
    records = {
        0: [_entry(1, "all_reduce", [[4]]), _entry(2, "all_reduce", [[4]])],
        1: [_entry(1, "all_reduce", [[4]])],
        2: [],
    }
    assert flight_recorder.last_collectives(records) == {
        0: "#2 all_reduce [[4]]",
        1: "#1 all_reduce [[4]]",
        2: "none",
    }


def test_flight_records_are_read_per_rank(tmp_path):
    for rank in (1, 0):
        dump = {"entries": [_entry(1, "broadcast", [[2]])], "pg_config": {}, "version": "2.10"}
        (tmp_path / f"rank_{rank}").write_bytes(pickle.dumps(dump))
    (tmp_path / "notes.txt").write_text("not a record")
    records = flight_recorder.flight_records(tmp_path)
    assert list(records) == [0, 1] and records[1][0]["profiling_name"] == "gloo:broadcast"


def test_no_dump_unless_recording(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_FR_BUFFER_SIZE", raising=False)
    monkeypatch.setenv("TORCH_FR_DUMP_TEMP_FILE", str(tmp_path / "rank_"))
    assert flight_recorder.dump_flight_record(0) is None and not list(tmp_path.iterdir())


def test_route_says_what_this_pytorch_offers():
    route = flight_recorder.flight_recorder_route()
    assert "gloo" in route and ("records" in route or "has no flight recorder" in route)


def test_no_analysis_without_records(tmp_path):
    report, route = flight_recorder.analyse_flight_records(tmp_path / "none", world_size=2)
    assert report == "" and route.startswith(f"no flight records in {tmp_path / 'none'}")


def test_without_the_analyser_the_route_says_so(tmp_path, monkeypatch):
    """PyTorch 2.6 ships no torch.distributed.flight_recorder: no report, and the route says why."""
    (tmp_path / "rank_0").write_bytes(pickle.dumps({"entries": [], "pg_config": {}}))

    def missing(folder):
        raise ModuleNotFoundError("No module named 'torch.distributed.flight_recorder'")

    monkeypatch.setattr(flight_recorder, "_run_analyser", missing)
    report, route = flight_recorder.analyse_flight_records(tmp_path, world_size=1)
    assert report == "" and route.endswith("has no torch.distributed.flight_recorder")


def test_the_analyser_reads_gloo_dumps_after_the_group_is_named(tmp_path):
    """Dumps shaped as this PyTorch's gloo writes them (pg_config keyed ""): rank 1 is missing
    from collective #2, and the analyser says so."""
    pytest.importorskip(
        "torch.distributed.flight_recorder.fr_trace",
        reason="this PyTorch has no flight-recorder analyser (2.6); the test above covers that",
    )
    entries = {
        0: [_entry(1, "all_reduce", [[4]]), _entry(2, "all_reduce", [[4]])],
        1: [_entry(1, "all_reduce", [[4]])],
    }
    for rank, mine in entries.items():
        for e in mine:
            e.update(
                record_id=e["collective_seq_id"] - 1,
                pg_id=0,
                p2p_seq_id=0,
                op_id=1,
                output_sizes=e["input_sizes"],
                input_dtypes=["Float"],
                output_dtypes=["Float"],
                state="scheduled",
                is_p2p=False,
                time_created_ns=0,
                frames=[],
                timeout_ms=3000,
            )
        dump = {
            "version": "2.10",
            "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},
            "pg_status": {},
            "entries": mine,
        }
        (tmp_path / f"rank_{rank}").write_bytes(pickle.dumps(dump))
    report, route = flight_recorder.analyse_flight_records(tmp_path, world_size=2)
    assert "missing ranks: {1}" in report, (route, report)
