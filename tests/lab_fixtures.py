"""Run records for the lesson 10 tests: valid ones built the way course_utils.jobs.lab_train
builds them, so that each test can break one field. Imported by the tests (tests/ is on
sys.path under pytest)."""

from __future__ import annotations

import copy

from course_utils.lab import run_records

SHAPES = {"1x1": (1, 1), "1x2": (1, 2), "1x4": (1, 4), "2x2": (2, 2)}


def record(
    name: str = "1x2",
    throughput: float = 1000.0,
    study: str = "scaling",
    lr: float = 0.05,
    script: str | None = None,
) -> dict:
    nodes, per_node = SHAPES.get(name, (1, 1))
    names = [f"cn{n}" for n in range(1, nodes + 1)]
    return {
        "record": run_records.KIND,
        "schema": run_records.SCHEMA,
        "study": study,
        "name": name,
        "label": {
            "machine": "test machine",
            "launcher": "local",
            "date": "2026-11-25",
            "commit": "abc1234",
            "torch": "2.14.1",
            "job": None,
            "script": script,
        },
        "configuration": {
            "nodes": nodes,
            "ranks": nodes * per_node,
            "ranks_per_node": per_node,
            "threads_per_rank": 1,
            "cpus_per_task": 1,
            "batch_per_rank": 32,
            "steps": 8,
            "lr": lr,
            "device": "cpu",
            "gpus_per_rank": 0,
        },
        "node_names": names,
        "backend": "gloo",
        "throughput": throughput,
        "step_time": 0.05,
        "communication_share": 0.2,
        "utilisation": {"cpu_percent": 90.0, "gpu_percent": None},
        "energy": {"joules": None, "source": "not reported", "scope": "no GPU"},
        "staging": {"copies": dict.fromkeys(names, 1), "base": "/tmp", "base_from": "/tmp"},
        "allreduce": None,
        "transport": "socket",
        "loss": {"first": 2.3, "last": 2.0},
    }


def study(efficiencies: dict[str, float], base: float = 1000.0) -> list[dict]:
    """Records of the four shapes whose throughputs give these efficiencies (1x1 is 1.0)."""
    out = [record("1x1", base)]
    for name, eff in efficiencies.items():
        ranks = SHAPES[name][0] * SHAPES[name][1]
        out.append(record(name, base * ranks * eff))
    return copy.deepcopy(out)
