"""The lab's run records: one labelled JSON file per run, written atomically, validated on read.
Taught in lesson 10.

Every run of the scaling study, the sweep and the checks writes one record (rank 0 writes it,
through `files.atomic_write_text`, so a reader never sees half of one). `validate` lists what is
wrong with a record; `load` reads a folder of them and refuses an invalid one, naming the file.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path

from course_utils import paths
from course_utils.files import atomic_write_text

KIND, SCHEMA = "course-lab-run", 1
STUDIES = ("scaling", "sweep", "check")
ENERGY_SOURCES = ("nvml", "rapl", "not reported")
LAUNCHERS = ("slurm", "local")
CONFIGURATION = (
    "nodes",
    "ranks",
    "ranks_per_node",
    "threads_per_rank",
    "batch_per_rank",
    "steps",
    "lr",
    "device",
)
NUMBERS = ("throughput", "step_time", "communication_share")


def machine(environ: Mapping[str, str] | None = None, cpu: str | None = None) -> str:
    """What ran the job: the Slurm cluster and its nodes, else this host (and its CPU)."""
    environ = os.environ if environ is None else environ
    if environ.get("SLURM_JOB_ID"):
        cluster = environ.get("SLURM_CLUSTER_NAME", "?")
        nodes = environ.get("SLURM_JOB_NODELIST", "?")
        return f"Slurm cluster {cluster!r}, nodes {nodes}" + (f", {cpu}" if cpu else "")
    return socket.gethostname() + (f", {cpu}" if cpu else "")


def label(
    launcher: str,
    environ: Mapping[str, str] | None = None,
    cpu: str | None = None,
    torch_version: str = "",
    script: str | None = None,
) -> dict:
    """Who ran what: machine, launcher, date, the course's commit, PyTorch, the Slurm job (or
    none) and the digest of the batch script that started it (or none)."""
    environ = os.environ if environ is None else environ
    job = environ.get("SLURM_JOB_ID")
    if environ.get("SLURM_ARRAY_JOB_ID"):
        job = f"{environ['SLURM_ARRAY_JOB_ID']}_{environ.get('SLURM_ARRAY_TASK_ID', '?')}"
    return {
        "machine": machine(environ, cpu),
        "launcher": launcher,
        "date": datetime.date.today().isoformat(),
        "commit": paths.commit(),
        "torch": torch_version,
        "job": job,
        "script": script,
    }


def _problems_of_configuration(record: dict) -> list[str]:
    config = record.get("configuration")
    if not isinstance(config, dict):
        return ["no 'configuration' object"]
    problems = [f"configuration has no {key!r}" for key in CONFIGURATION if key not in config]
    if problems:
        return problems
    if config["ranks"] != config["nodes"] * config["ranks_per_node"]:
        problems.append(
            f"ranks={config['ranks']} is not nodes x ranks_per_node = "
            f"{config['nodes']} x {config['ranks_per_node']}"
        )
    names = record.get("node_names", [])
    if len(set(names)) != config["nodes"]:
        problems.append(f"{config['nodes']} node(s) in the configuration, {names} in node_names")
    return problems


def _problems_of_measures(record: dict) -> list[str]:
    problems = []
    for key in NUMBERS:
        value = record.get(key)
        if not isinstance(value, (int, float)) or value < 0:
            problems.append(f"{key} is {value!r}, not a number >= 0")
    if record.get("throughput") == 0:
        problems.append("throughput is 0 images/s")
    share = record.get("communication_share")
    if isinstance(share, (int, float)) and share > 1:
        problems.append(f"communication_share={share} is above 1 (a share of the step)")
    energy = record.get("energy", {})
    if energy.get("source") not in ENERGY_SOURCES:
        problems.append(f"energy source {energy.get('source')!r} is not one of {ENERGY_SOURCES}")
    elif (energy.get("joules") is None) != (energy["source"] == "not reported"):
        problems.append(f"energy {energy}: joules go with a source, none with 'not reported'")
    if "cpu_percent" not in record.get("utilisation", {}):
        problems.append("utilisation has no 'cpu_percent'")
    return problems


def _problems_of_staging(record: dict) -> list[str]:
    copies = record.get("staging", {}).get("copies")
    if not isinstance(copies, dict):
        return ["staging has no 'copies' per node"]
    names = sorted(set(record.get("node_names", [])))
    if sorted(copies) != names or any(n != 1 for n in copies.values()):
        return [f"staging made copies {copies}; expected one on each of the nodes {names}"]
    return []


def validate(record) -> list[str]:
    """What is wrong with `record` (an empty list when nothing is)."""
    if not isinstance(record, dict) or record.get("record") != KIND:
        return [f"not a {KIND} record"]
    problems = []
    if record.get("schema") != SCHEMA:
        problems.append(f"schema {record.get('schema')!r}, expected {SCHEMA}")
    if record.get("study") not in STUDIES:
        problems.append(f"study {record.get('study')!r} is not one of {STUDIES}")
    if not record.get("name"):
        problems.append("no 'name'")
    lab = record.get("label", {})
    missing = [k for k in ("machine", "launcher", "date", "commit") if not lab.get(k)]
    if missing:
        problems.append(f"label lacks {', '.join(missing)}")
    elif lab["launcher"] not in LAUNCHERS:
        problems.append(f"launcher {lab['launcher']!r} is not one of {LAUNCHERS}")
    if not record.get("backend"):
        problems.append("no 'backend'")
    return (
        problems
        + _problems_of_configuration(record)
        + _problems_of_measures(record)
        + _problems_of_staging(record)
    )


def record_path(folder: str | os.PathLike, study: str, name: str) -> Path:
    return Path(folder) / study / f"{name}.json"


def save(record: dict, folder: str | os.PathLike) -> Path:
    """Write `record` as <folder>/<study>/<name>.json, atomically; refuses an invalid one."""
    problems = validate(record)
    if problems:
        raise ValueError(f"record {record.get('name')!r} is not valid: {'; '.join(problems)}")
    path = record_path(folder, record["study"], record["name"])
    return atomic_write_text(path, json.dumps(record, indent=2) + "\n")


def load(folder: str | os.PathLike, study: str | None = None) -> list[dict]:
    """Every record under `folder` (of one `study`, if given), sorted by ranks then name.
    ValueError naming the first file that is not a valid record."""
    pattern = f"{study}/*.json" if study else "*/*.json"
    records = []
    for path in sorted(Path(folder).glob(pattern)):
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not JSON ({e}); delete it and run again") from e
        problems = validate(record)
        if problems:
            raise ValueError(f"{path} is not a valid record: {'; '.join(problems)}")
        records.append(record)
    return sorted(records, key=lambda r: (r["configuration"]["ranks"], r["name"]))


# ---- a run's result in its Slurm job's record ------------------------------------------------

COMMENT = "lab"  # how a run's result starts in its job's comment (after witness's "course:")
COMMENT_LOSSES = 5  # the first losses it carries: exercise 10.2's check trains as many itself
_KEYS = {  # key in the comment: (where it goes in the summary, how it is read)
    "nodes": (("configuration", "nodes"), int),
    "ranks": (("configuration", "ranks"), int),
    "batch": (("configuration", "batch_per_rank"), int),
    "steps": (("configuration", "steps"), int),
    "lr": (("configuration", "lr"), float),
    "device": (("configuration", "device"), str),
    "images/s": (("throughput",), float),
    "step": (("step_time",), float),
    "comm": (("communication_share",), float),
    "last": (("loss", "last"), float),
}


def to_comment(record: dict) -> str:
    """What a run leaves in its job's comment (`witness.to_job_record`), short enough for one:
    `lab STUDY NAME nodes=.. ranks=.. batch=.. steps=.. lr=.. device=.. images/s=.. step=..
    comm=.. last=.. losses=L1,...` with its first COMMENT_LOSSES losses: enough for the lesson's
    tables and decision, and for a judge to train the same first steps."""
    c = record["configuration"]
    words = [
        COMMENT,
        record["study"],
        record["name"],
        f"nodes={c['nodes']}",
        f"ranks={c['ranks']}",
        f"batch={c['batch_per_rank']}",
        f"steps={c['steps']}",
        f"lr={c['lr']:g}",
        f"device={c['device']}",
        f"images/s={record['throughput']:.1f}",
        f"step={record['step_time']:.6f}",
        f"comm={record['communication_share']:.4f}",
        f"last={record['loss']['last']:.6f}",
        "losses=" + ",".join(f"{x:.6f}" for x in record["losses"][:COMMENT_LOSSES]),
    ]
    return " ".join(words)


def from_comment(text: str) -> dict | None:
    """The run summary `to_comment` wrote, shaped as a record's fields (name, study,
    configuration with ranks_per_node, throughput, step_time, communication_share, loss,
    losses); None for any other text."""
    words = text.split()
    if len(words) < 3 or words[0] != COMMENT or words[1] not in STUDIES:
        return None
    summary: dict = {"study": words[1], "name": words[2], "configuration": {}, "loss": {}}
    try:
        pairs = dict(word.split("=", 1) for word in words[3:])
        for key, (where, kind) in _KEYS.items():
            target = summary
            for part in where[:-1]:
                target = target[part]
            target[where[-1]] = kind(pairs[key])
        losses = [float(x) for x in pairs["losses"].split(",") if x]
    except (KeyError, ValueError):
        return None
    config = summary["configuration"]
    if config["nodes"] < 1 or config["ranks"] % config["nodes"] or not losses:
        return None
    config["ranks_per_node"] = config["ranks"] // config["nodes"]
    summary["losses"] = losses
    summary["loss"]["first"] = sum(losses) / len(losses)
    return summary
