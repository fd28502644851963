"""lab: who launches lesson 10's steps (Slurm or local ranks), the sizes of the study, and
how a batch script's srun line becomes a local launch. No process is started: the answers of
`sinfo` are injected (processes.run replaced), the launches are tested in tests/integration."""

import pytest

from course_utils import processes
from course_utils.lab import cluster
from course_utils.lab.staging import NODE_VARIABLE
from course_utils.ranks import DistEnv


def test_slurm_when_a_controller_answers_else_local():
    assert cluster.choose_launcher(None, "/usr/bin/sbatch", True).kind == "slurm"
    none = cluster.choose_launcher(None, None, False)
    assert (none.kind, none.why) == ("local", "no Slurm here: sbatch is not installed")
    down = cluster.choose_launcher(
        None, "/usr/bin/sbatch", False, "sinfo: error: Unable to contact\n"
    )
    assert down.kind == "local" and down.why.endswith(": sinfo: error: Unable to contact")


def test_the_variable_decides_when_set():
    assert cluster.choose_launcher("local", "/usr/bin/sbatch", True).kind == "local"
    assert cluster.choose_launcher("slurm", None, False).why == "COURSE_LAB_LAUNCHER=slurm"
    with pytest.raises(ValueError, match="COURSE_LAB_LAUNCHER='pbs' must be 'slurm' or 'local'"):
        cluster.choose_launcher("pbs", None, False)


def _answers(monkeypatch, sbatch, stdout="", returncode=0):
    calls = []

    def run(command, **kwargs):
        calls.append(command)
        return processes.Finished(tuple(command), returncode, stdout, "", 0.1)

    monkeypatch.setattr(cluster.shutil, "which", lambda name: sbatch)
    monkeypatch.setattr(processes, "run", run)
    return calls


def test_find_launcher_asks_sinfo(monkeypatch):
    calls = _answers(monkeypatch, "/usr/bin/sbatch", stdout="idle\nidle\n")
    assert cluster.find_launcher({}).kind == "slurm" and calls == [["sinfo", "-h", "-o", "%t"]]
    _answers(monkeypatch, "/usr/bin/sbatch", returncode=1)
    assert cluster.find_launcher({}).kind == "local"
    calls = _answers(monkeypatch, None)
    assert cluster.find_launcher({}).kind == "local" and calls == []
    calls = _answers(monkeypatch, "/usr/bin/sbatch")
    assert (
        cluster.find_launcher({cluster.LAUNCHER_VARIABLE: "local"}).kind == "local" and calls == []
    )


def test_the_study_sizes():
    assert [s.name for s in cluster.SHAPES] == ["1x1", "1x2", "1x4", "2x2"]
    assert cluster.Shape(2, 2).sbatch_options() == [
        "--nodes=2",
        "--ntasks=4",
        "--ntasks-per-node=2",
    ]
    assert cluster.digest("a") != cluster.digest("b") and len(cluster.digest("a")) == 16


def test_a_local_rank_reads_its_place_as_from_a_launcher():
    base = {"PATH": "/usr/bin", "RANK": "7"}  # a stale rank variable is overwritten
    two_nodes = cluster.Shape(2, 2)
    envs = [cluster.rank_environ(base, two_nodes, rank, 29555) for rank in range(4)]
    places = [DistEnv.from_environ(env) for env in envs]
    assert [(p.rank, p.local_rank, p.world_size, p.local_world_size) for p in places] == [
        (0, 0, 4, 2),
        (1, 1, 4, 2),
        (2, 0, 4, 2),
        (3, 1, 4, 2),
    ]
    assert {(p.master_addr, p.master_port) for p in places} == {("127.0.0.1", 29555)}
    assert [env[NODE_VARIABLE] for env in envs] == ["node0", "node0", "node1", "node1"]
    assert envs[3]["PATH"] == "/usr/bin"


def test_one_node_keeps_its_own_name():
    env = cluster.rank_environ({}, cluster.Shape(1, 4), 3, 29555)
    assert NODE_VARIABLE not in env  # the node is this machine: staging names it by host
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("3", "4")
