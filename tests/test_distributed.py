"""course_utils.distributed and the DDP training program course_utils.jobs.ddp_train."""

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
import torch

from course_utils import distributed, launching, processes, ranks
from course_utils.device import TaskView, plan_device
from course_utils.jobs import ddp_train
from course_utils.ranks import DistEnv, expand_hostlist, port_for_job

ASSETS = Path(__file__).parent / "assets"


def test_torchrun_variables_win_over_slurm():
    environ = {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "cn1",
        "MASTER_PORT": "1234",
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "2",
    }
    assert DistEnv.from_environ(environ) == DistEnv(3, 1, 4, "cn1", 1234, "torchrun", 2)


def test_slurm_variables_and_first_host(monkeypatch):
    # scontrol's answer is injected: the fast lane starts no process
    asked = []

    def scontrol(cmd, **kwargs):
        asked.append(cmd[1:])
        return processes.Finished(tuple(cmd), 0, "gpu07\ngpu08\ngpu09\ngpu10\n", "", 0.0)

    monkeypatch.setattr(ranks.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(processes, "run", scontrol)
    environ = {
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SLURM_NTASKS": "8",
        "SLURM_JOB_NODELIST": "gpu[07-10]",
        "SLURM_JOB_ID": "123456",
        "SLURM_STEP_ID": "0",
    }
    env = DistEnv.from_environ(environ)
    assert (env.rank, env.local_rank, env.world_size, env.source) == (5, 1, 8, "slurm")
    assert env.local_world_size == 2  # without a per-node count: at least local rank + 1
    assert env.master_addr == "gpu07"
    assert env.master_port == port_for_job(123456) == 20000 + 123456 % 10000
    assert asked == [["show", "hostnames", "gpu[07-10]"]]


def test_first_host_without_scontrol_uses_our_parser(monkeypatch):
    monkeypatch.setattr(ranks.shutil, "which", lambda name: None)
    environ = {
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "2",
        "SLURM_STEP_ID": "0",
        "SLURM_JOB_ID": "5",
        "SLURM_JOB_NODELIST": "cn[3-4]",
    }
    assert DistEnv.from_environ(environ).master_addr == "cn3"


def test_slurm_respects_master_addr_and_port():
    environ = {
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_JOB_NODELIST": "cn1",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "4242",
        "SLURM_JOB_ID": "7",
    }
    env = DistEnv.from_environ(environ)
    assert (env.master_addr, env.master_port) == ("10.0.0.1", 4242)


def test_the_batch_script_itself_is_not_a_task(fake_commands):
    fake_commands({"scontrol show hostnames": "cn1\n"})  # where Slurm is installed
    batch = {
        "SLURM_JOB_ID": "9",
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "4",
        "SLURM_JOB_NODELIST": "cn1",
    }
    assert DistEnv.from_environ(batch).world_size == 1
    assert DistEnv.from_environ({**batch, "SLURM_STEP_ID": "0"}).world_size == 4


def test_no_launcher_is_rank_0_of_1():
    assert DistEnv.from_environ({}) == DistEnv(0, 0, 1, "127.0.0.1", 29500, "none", 1)


@pytest.mark.parametrize(
    ("spec", "node", "tasks"),
    [("4", 0, 4), ("2(x3),1", 2, 2), ("2(x3),1", 3, 1), ("3,1", 1, 1)],
)
def test_tasks_on_node_reads_slurms_compressed_counts(spec, node, tasks):
    assert ranks.tasks_on_node(spec, node) == tasks


def test_slurm_local_world_size_comes_from_this_nodes_task_count(fake_commands):
    fake_commands({"scontrol show hostnames": "cn1\ncn2\ncn3\n"})  # where Slurm is installed
    environ = {
        "SLURM_JOB_ID": "9",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "4",
        "SLURM_LOCALID": "0",
        "SLURM_NTASKS": "5",
        "SLURM_NODEID": "2",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2),1",
        "SLURM_JOB_NODELIST": "cn[1-3]",
    }
    assert DistEnv.from_environ(environ).local_world_size == 1
    with pytest.raises(ValueError, match=r"'2\(y2\)' is not a count"):
        ranks.tasks_on_node("2(y2)", 0)


@pytest.mark.parametrize(
    ("local_world_size", "gpus", "backend"),
    [
        (1, 0, "gloo"),
        (2, 0, "gloo"),
        (1, 1, "nccl"),
        (4, 4, "nccl"),
        (2, 8, "nccl"),
        (2, 1, "gloo"),
        (4, 2, "gloo"),
    ],
)
def test_choose_backend_nccl_only_with_a_gpu_per_local_rank(local_world_size, gpus, backend):
    assert distributed.choose_backend(local_world_size, gpus) == backend


@pytest.mark.parametrize(
    ("ranks_", "gpus"), [(1, 0), (2, 0), (1, 1), (4, 4), (2, 8), (2, 1), (4, 2)]
)
def test_the_backend_a_plan_implies_agrees_with_the_count_rule(ranks_, gpus):
    for local_rank in range(ranks_):
        plan = plan_device(local_rank, ranks_, gpus=gpus)
        assert distributed.backend_for(plan) == distributed.choose_backend(ranks_, gpus)


def test_one_gpu_named_for_every_rank_means_gloo_though_the_node_has_enough():
    # COURSE_DEVICE=cuda:0, 2 local ranks, 2 GPUs: both ranks on cuda:0, which NCCL refuses
    plans = [plan_device(r, 2, "cuda:0", gpus=2, source="COURSE_DEVICE") for r in range(2)]
    assert [str(p.device) for p in plans] == ["cuda:0", "cuda:0"]
    assert all(p.shares_gpu for p in plans)
    assert {distributed.backend_for(p) for p in plans} == {"gloo"}
    assert distributed.choose_backend(2, 2) == "nccl"  # the raw count alone would say nccl


def test_choose_backend_rejects_impossible_counts():
    with pytest.raises(ValueError, match="local_world_size=0 must be >= 1"):
        distributed.choose_backend(0, 1)


class _CapturedJoin:
    """Stands in for the job's store (an in-memory one holding the other ranks' views), what
    this task sees, torch's init_process_group and set_device: records what they were given."""

    def __init__(self, monkeypatch, views):
        self.calls, self.devices, self.store = [], [], torch.distributed.HashStore()
        for rank, view in enumerate(views):
            self.store.set(f"{distributed.VIEW_KEY}/0/{rank}", json.dumps(view.as_dict()))
        monkeypatch.setattr(distributed, "_join_store", lambda env, timeout: self.store)
        monkeypatch.setattr(distributed, "_this_task", lambda env: views[env.rank])
        monkeypatch.setattr(distributed.dist, "init_process_group", self.join)
        monkeypatch.setattr(torch.cuda, "set_device", self.devices.append)
        monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
        monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
        saved = dict(os.environ)
        monkeypatch.setattr(distributed, "_STATE", None)
        self.restore = lambda: (os.environ.clear(), os.environ.update(saved))

    def join(self, backend, **kwargs):
        self.calls.append(backend)


def _node_of(gpus: int, ranks_: int = 2) -> list[TaskView]:
    """A node whose ranks all see its `gpus` GPUs (torchrun's workers, --gpus-per-node)."""
    return [TaskView("n", r, tuple(f"GPU-{i}" for i in range(gpus))) for r in range(ranks_)]


@pytest.mark.parametrize(
    ("gpus", "local_rank", "choice", "backend", "device"),
    [
        (2, 1, None, "nccl", "cuda:1"),
        (1, 1, None, "gloo", "cuda:0"),
        (0, 1, None, "gloo", "cpu"),
        (2, 1, "cuda:0", "gloo", "cuda:0"),  # COURSE_DEVICE=cuda:0: both ranks share cuda:0
        (2, 0, "cuda:0", "gloo", "cuda:0"),
    ],
)
def test_init_process_group_uses_the_device_and_backend_rules(
    fake_gpus, monkeypatch, gpus, local_rank, choice, backend, device
):
    fake_gpus(gpus)
    if choice:
        monkeypatch.setenv("COURSE_DEVICE", choice)
    join = _CapturedJoin(monkeypatch, _node_of(gpus))
    env = DistEnv(local_rank, local_rank, 2, "127.0.0.1", 29500, "torchrun", 2)
    try:
        distributed.init_process_group(env=env)
    finally:
        join.restore()
    assert join.calls == [backend]
    assert join.devices == ([torch.device(device)] if device != "cpu" else [])
    assert distributed._STATE.device == torch.device(device)


@pytest.mark.parametrize(
    ("constrained", "backend"), [(True, "gloo"), (None, "gloo"), (False, "nccl")]
)
def test_under_per_task_binding_the_gathered_views_decide_not_the_count(
    fake_gpus, monkeypatch, capsys, constrained, backend
):
    """--gpus-per-task=1: each task counts 1 GPU for 2 local ranks, which alone would say
    "share" and gloo; the views say each has its own, and whether they can reach each other."""
    fake_gpus(1)
    views = [TaskView("cn1", k, (f"GPU-{k}",), str(k), 2, constrained) for k in range(2)]
    join = _CapturedJoin(monkeypatch, views)
    try:
        distributed.init_process_group(env=DistEnv(0, 0, 2, "127.0.0.1", 29500, "slurm", 2))
    finally:
        join.restore()
    assert join.calls == [backend] and join.devices == [torch.device("cuda:0")]
    said = capsys.readouterr().out
    assert "share" not in said and (("--gpu-bind=none" in said) == (backend == "gloo"))


def test_every_rank_leaves_its_view_and_reads_the_others():
    store = torch.distributed.HashStore()
    mine = [TaskView("cn1", k, (f"GPU-{k}",), str(k)) for k in range(2)]
    store.set(f"{distributed.VIEW_KEY}/0/1", json.dumps(mine[1].as_dict()))
    env = DistEnv(0, 0, 2, "127.0.0.1", 29500, "slurm", 2)
    assert distributed.gathered_views(store, env, mine[0]) == mine


def test_the_batch_script_of_a_multi_task_job_is_warned_about():
    batch = {"SLURM_JOB_ID": "9", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}
    warning = ranks.batch_script_warning(batch)
    assert "SLURM_NTASKS=4 tasks" in warning and "srun python" in warning
    assert ranks.batch_script_warning({**batch, "SLURM_STEP_ID": "0"}) is None  # a task
    assert ranks.batch_script_warning({**batch, "SLURM_NTASKS": "1"}) is None
    assert ranks.batch_script_warning({}) is None


def test_ports_of_two_jobs_differ_and_stay_in_range():
    ports = {port_for_job(j) for j in range(1000, 1100)}
    assert len(ports) == 100
    assert all(20000 <= p < 30000 for p in ports)
    with pytest.raises(ValueError, match="non-negative"):
        port_for_job(-1)


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({"RANK": "4", "LOCAL_RANK": "0", "WORLD_SIZE": "4"}, "RANK=4 is outside 0..WORLD_SIZE"),
        ({"RANK": "1", "LOCAL_RANK": "2", "WORLD_SIZE": "4"}, "LOCAL_RANK=2 .*RANK=1"),
        ({"RANK": "1", "WORLD_SIZE": "4"}, "LOCAL_RANK not set"),
        ({"RANK": "x", "LOCAL_RANK": "0", "WORLD_SIZE": "4"}, "RANK='x' is not an integer"),
        ({"SLURM_PROCID": "2", "SLURM_NTASKS": "2"}, "SLURM_PROCID=2 is outside 0..SLURM_NTASKS"),
        ({"SLURM_PROCID": "1", "SLURM_LOCALID": "3", "SLURM_NTASKS": "4"}, "SLURM_LOCALID=3"),
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "0"}, "SLURM_NTASKS=0 must be at least 1"),
        (
            {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "1"},
            "LOCAL_RANK=1 is outside 0..LOCAL_WORLD_SIZE-1",
        ),
        (
            {
                "SLURM_PROCID": "3",
                "SLURM_LOCALID": "1",
                "SLURM_NTASKS": "4",
                "SLURM_STEP_TASKS_PER_NODE": "1(x4)",
                "SLURM_NODEID": "2",
            },
            "SLURM_LOCALID=1 is outside 0..tasks on this node",
        ),
    ],
)
def test_inconsistent_values_name_the_variables(environ, names):
    with pytest.raises(ValueError, match=names):
        DistEnv.from_environ(environ)


@pytest.mark.parametrize(
    ("hostlist", "hosts"),
    [
        ("cn1", ["cn1"]),
        ("cn[1-3,7]", ["cn1", "cn2", "cn3", "cn7"]),
        ("a[01-03],b5", ["a01", "a02", "a03", "b5"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("gpu[008-010]-ib", ["gpu008-ib", "gpu009-ib", "gpu010-ib"]),
        ("x,y[9-10]", ["x", "y9", "y10"]),
    ],
)
def test_expand_hostlist(hostlist, hosts):
    assert expand_hostlist(hostlist) == hosts


@pytest.mark.parametrize(
    ("hostlist", "message"),
    [
        ("cn[1-3", "unclosed"),
        ("cn[3-1]", "runs backwards"),
        ("cn[a]", "not a number"),
        ("", "empty"),
    ],
)
def test_expand_hostlist_rejects_bad_syntax(hostlist, message):
    with pytest.raises(ValueError, match=message):
        expand_hostlist(hostlist)


def test_no_option_of_ddp_train_is_a_prefix_of_a_torchrun_option():
    from torch.distributed.run import get_args_parser

    theirs = {o for a in get_args_parser()._actions for o in a.option_strings if o.startswith("--")}
    parser_options = _ddp_train_options()
    clashes = [(o, t) for o in parser_options for t in theirs if t.startswith(o)]
    assert parser_options and not clashes


def _ddp_train_options():
    import argparse
    from unittest import mock

    captured = []
    real = argparse.ArgumentParser.parse_args

    def spy(self, argv=None, namespace=None):
        captured.extend(o for a in self._actions for o in a.option_strings if o.startswith("--"))
        return real(self, [], namespace)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", spy):
        ddp_train.parse_args([])
    return [o for o in captured if o != "--help"]


def test_a_missing_rank_fails_with_a_clear_message():
    env = DistEnv(0, 0, 2, "127.0.0.1", launching.free_port(), "torchrun")
    saved = dict(os.environ)
    try:
        with pytest.raises(RuntimeError, match="not all 2 processes joined within 0.5 s"):
            distributed.init_process_group("gloo", env, timeout=0.5)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_a_port_in_use_is_named_as_the_cause():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = DistEnv(0, 0, 2, "127.0.0.1", taken.getsockname()[1], "torchrun")
        saved = dict(os.environ)
        try:
            with pytest.raises(RuntimeError, match="already in use by another process"):
                distributed.init_process_group("gloo", env, timeout=5)
        finally:
            os.environ.clear()
            os.environ.update(saved)


class _RecordingStream:
    def __init__(self):
        self.writes = []

    def write(self, text):
        self.writes.append(text)
        return len(text)

    def flush(self):
        pass


def test_rank_lines_are_written_whole_so_ranks_cannot_interleave(monkeypatch):
    # Two ranks share a node's stdout; a line split into text and newline writes can be cut in two
    # by the other rank's line (seen under Slurm with unbuffered output).
    stream = _RecordingStream()
    monkeypatch.setattr("sys.stdout", stream)
    distributed.print_line("rank", 1, "joined")
    distributed.print0("epoch 1:", "loss 2.3")  # rank 0 outside any launcher
    distributed.print_rank("hello")
    assert stream.writes == ["rank 1 joined\n", "epoch 1: loss 2.3\n", "[rank 0] hello\n"]


class _FakeGroup:
    """A process group whose destroy_process_group blocks until released (or returns at once)."""

    def __init__(self, monkeypatch, hangs: bool):
        self.release = threading.Event()
        self.exit_codes = []
        self.hangs = hangs
        monkeypatch.setattr(distributed.dist, "is_initialized", lambda: True)
        monkeypatch.setattr(distributed.dist, "get_rank", lambda: 3)
        monkeypatch.setattr(distributed.dist, "destroy_process_group", self.destroy)
        monkeypatch.setattr(distributed.os, "_exit", self.exit)

    def destroy(self):
        if self.hangs:
            assert self.release.wait(10), "the watchdog never fired"

    def exit(self, code):
        self.exit_codes.append(code)
        self.release.set()  # stands in for the process ending


def test_cleanup_ends_a_process_whose_teardown_hangs(monkeypatch, capsys):
    group = _FakeGroup(monkeypatch, hangs=True)
    distributed.cleanup(timeout=0.2)
    assert group.exit_codes == [0]  # the work was done: a clean exit, not a failure
    assert "rank 3: destroy_process_group did not return within 0.2 s" in capsys.readouterr().out


def test_cleanup_leaves_a_normal_teardown_alone(monkeypatch):
    group = _FakeGroup(monkeypatch, hangs=False)
    distributed.cleanup(timeout=0.2)
    time.sleep(0.4)  # past the timeout: the watchdog must have stood down
    assert group.exit_codes == []
