"""Lesson 10 checkers: pass on the reference answers, fail with a useful message on wrong ones,
and a stub is "not attempted". 10.3 and 10.4 read logs and records only. 10.1 and 10.2 run
things: here what they judge before and after a run (the run itself replaced, or the reports
of the ranks given); the real runs, solution and wrong answers, are in
tests/integration/test_lab_checks.py."""

import re
import shutil

import pytest
from lab_fixtures import record, study

from course_utils import batch
from course_utils.grading import NOT_ATTEMPTED, run_check
from course_utils.grading.checks import lesson10
from course_utils.lab import cluster, run_records, transport
from course_utils.lab.nccl_excerpts import EXCERPTS


def stub(*args):
    raise NotImplementedError("Exercise 10.k")


# ---- 10.3 ------------------------------------------------------------------------------------


def diagnose_transport(log):
    kinds = set()
    for via in re.findall(r" via (\S+)", log):
        if via.startswith(("NET/Socket", "TCP/")):
            kinds.add("socket")
        elif via.startswith("NET/IB"):
            kinds.add("ib-gdr" if "/GDRDMA" in via else "ib")
        elif via.startswith("SHM"):
            kinds.add("shm")
        elif via.startswith("P2P"):
            kinds.add("p2p")
    return next(kind for kind in ("socket", "ib", "ib-gdr", "shm", "p2p") if kind in kinds)


@pytest.fixture
def runs(tmp_path):
    """A notebook's runs/10 with its own 2-node log (gloo over loopback) and scaling records."""
    logs = tmp_path / "records" / "logs"
    logs.mkdir(parents=True)
    gloo = transport.GLOO_LINE.format(
        rank=0, peer=2, interface="lo", local="127.0.0.1:1", remote="127.0.0.1:2"
    )
    (logs / "2x2.log").write_text(f"rank 0/4 joined\n{gloo}\n")
    for r in study({"1x2": 0.9, "1x4": 0.7, "2x2": 0.6}):
        run_records.save(r, tmp_path / "records")
    return tmp_path


def test_10_3_names_the_transport_in_every_log(runs):
    assert run_check("10.3", diagnose_transport, runs).passed
    assert run_check("10.3", stub, runs).verdict == NOT_ATTEMPTED


def test_10_3_a_node_link_named_for_a_multi_node_job_gets_the_hint(runs):
    def first_link(log):  # reads the first "via" only: P2P inside the node
        via = re.search(r" via (\S+)", log)[1]
        return "p2p" if via.startswith("P2P") else diagnose_transport(log)

    result = run_check("10.3", first_link, runs)
    assert result.verdict == "failed"
    assert result.message == (
        "the constructed excerpt 'ib-gdr': expected 'ib-gdr', got 'p2p': across nodes the "
        "network link decides, not the links within a node"
    )


def test_10_3_gdrdma_is_not_ignored_and_names_are_checked(runs):
    no_gdr = run_check("10.3", lambda log: diagnose_transport(log.replace("/GDRDMA", "")), runs)
    assert no_gdr.message == "the constructed excerpt 'ib-gdr': expected 'ib-gdr', got 'ib'"
    vague = run_check("10.3", lambda log: "infiniband", runs)
    assert vague.message.startswith("your own 2-node run's log: expected one of ['p2p', 'shm',")


def test_10_3_and_10_4_without_runs_of_ones_own_say_so(tmp_path):
    # the message differs from the reference's, so a grader's comparison gives no points
    transport_only = run_check("10.3", diagnose_transport, tmp_path)
    assert transport_only.passed and transport_only.message.startswith(
        "named the transport in the logs the check brought; no 2-node log of yours yet in "
    )
    records_only = run_check("10.4", decide, tmp_path)
    assert records_only.passed and "no scaling records of yours yet" in records_only.message


# ---- 10.4 ------------------------------------------------------------------------------------


def decide(records, threshold):
    base = next(r["throughput"] for r in records if r["configuration"]["ranks"] == 1)
    eff = {r["name"]: r["throughput"] / base / r["configuration"]["ranks"] for r in records}
    ranks = max(
        r["configuration"]["ranks"]
        for r in records
        if r["configuration"]["ranks"] == 1 or eff[r["name"]] >= threshold
    )
    return eff, ranks


def test_10_4_on_own_records_and_brought_ones(runs):
    assert run_check("10.4", decide, runs).passed
    assert run_check("10.4", stub, runs).verdict == NOT_ATTEMPTED


def test_10_4_speed_up_is_not_efficiency(runs):
    def speedups(records, threshold):
        eff, ranks = decide(records, threshold)
        return {name: e * int(name[0]) * int(name[2]) for name, e in eff.items()}, ranks

    result = run_check("10.4", speedups, runs)
    assert result.message == (
        "your own records: expected 0.9000 for 1x2 (speed-up over 1 rank / ranks), got 1.8"
    )


def test_10_4_the_rule_takes_the_most_efficient_enough_ranks(runs):
    def fewest(records, threshold):  # plays safe: never more than one rank
        return decide(records, threshold)[0], 1

    result = run_check("10.4", fewest, runs)
    assert result.message == (
        "your own records: expected 2 ranks (the most whose efficiency is at least 80%), got 1"
    )

    def ignores_threshold(records, threshold):
        return decide(records, 0.8)

    later = run_check("10.4", ignores_threshold, runs)
    assert later.message.startswith("your own records, threshold 0.5: expected 4 ranks")


# ---- 10.2 ------------------------------------------------------------------------------------

SCRIPT = (cluster.SCRIPTS["scaling"]).read_text()


def script(text=SCRIPT):
    return lambda: text


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "#SBATCH --cpus-per-task=4",
            "#SBATCH --cpus-per-task=2",
            "expected --cpus-per-task=4 (a GPU's bundle), got 2",
        ),
        (
            "#SBATCH --time=00:10:00",
            "#SBATCH --time=02:00:00",
            "expected a --time of at most 15 minutes, got 02:00:00",
        ),
        (
            "#SBATCH --output=%x-%j.out",
            "#SBATCH --output=scaling.out",
            "expected an --output with %j (each job of the set its own log), got scaling.out",
        ),
        ("#SBATCH --gpus-per-task=1\n", "", "expected --gpus-per-task=1 in the header, got None"),
        (
            "#SBATCH --ntasks=1",
            "#SBATCH --ntasks=4",
            "expected --nodes=1 and --ntasks=1 (the set's sbatch options give the other sizes), "
            "got 1 node(s) and 4 task(s)",
        ),
        (
            '-c "$SLURM_CPUS_PER_TASK" ',
            "",
            'expected srun given the CPUs per task (-c "$SLURM_CPUS_PER_TASK"), got',
        ),
        (
            "--gpu-bind=closest",
            "--gpu-bind=none",
            "expected srun given --gpu-bind=closest on GPUs (not under COURSE_DEVICE=cpu), "
            "got none",
        ),
        (
            "-m course_utils.jobs.lab_train",
            "-m course_utils.jobs.ddp_train",
            'expected srun starting python -m course_utils.jobs.lab_train "$@", got '
            "course_utils.jobs.ddp_train",
        ),
    ],
)
def test_10_2_wrong_scripts_fail_before_anything_runs(monkeypatch, tmp_path, old, new, message):
    monkeypatch.setattr(cluster, "run_script", _no_run)
    assert old in SCRIPT
    result = run_check("10.2", script(SCRIPT.replace(old, new)), tmp_path)
    assert result.verdict == "failed" and result.message.startswith(message), result.message


def _no_run(*args, **kwargs):
    raise AssertionError("a wrong script must fail before it runs")


def _fake_run(writes: bool, code: int = 0):
    """cluster.run_script as if the script had run: a record with its digest (or none)."""

    def run(text, shape, launcher, data, records, folder, **kwargs):
        if writes:
            run_records.save(record("1x1", study="check", script=cluster.digest(text)), records)
        return batch.Job(shape.name, launcher.kind, code, "rank 0/1 joined\nthe last line\n", 1.0)

    return run


def _local(monkeypatch, run):
    monkeypatch.setattr(cluster, "find_launcher", lambda: batch.Launcher("local", "no Slurm here"))
    monkeypatch.setattr(cluster, "run_script", run)
    monkeypatch.setattr(lesson10, "_data", lambda folder: folder / "data")


def test_10_2_passes_when_its_run_wrote_a_record_with_the_scripts_digest(monkeypatch, tmp_path):
    _local(monkeypatch, _fake_run(writes=True))
    result = run_check("10.2", script(), tmp_path)
    assert result.passed and result.message.endswith("[via local ranks: no Slurm here]")
    assert run_check("10.2", stub, tmp_path).verdict == NOT_ATTEMPTED


def test_10_2_fails_when_the_run_fails_or_writes_nothing(monkeypatch, tmp_path):
    _local(monkeypatch, _fake_run(writes=False, code=2))
    failed = run_check("10.2", script(), tmp_path)
    assert failed.message.startswith(
        "your script at 1 node x 1 task ended with exit code 2 [via local ranks: no Slurm "
        "here]; its last lines:\nrank 0/1 joined"
    )
    _local(monkeypatch, _fake_run(writes=False))
    silent = run_check("10.2", script(), tmp_path)
    assert silent.message == (
        "expected one record from this script (its digest in the label), got []"
    )
    shutil.rmtree(tmp_path / "check-records", ignore_errors=True)


# ---- 10.1 ------------------------------------------------------------------------------------


def _report(node, rank, path, read, whole=3, expected=3):
    return {
        "who": f"rank {rank} on {node}",
        "node": node,
        "path": path,
        "is_dir": True,
        "whole": whole,
        "expected": expected,
        "read_archive": read,
    }


def test_10_1_judges_one_reader_per_node_and_complete_copies(tmp_path):
    base = str(tmp_path / "cn{node}")
    one, two = str(tmp_path / "cn1" / "j" / "cn1"), str(tmp_path / "cn2" / "j" / "cn2")
    good = [
        _report("cn1", 0, one, True),
        _report("cn1", 1, one, False),
        _report("cn2", 2, two, False),
        _report("cn2", 3, two, True),
    ]
    lesson10._judge(good, base, "2 nodes")  # raises nothing

    both = [_report("cn1", 0, one, True), _report("cn1", 1, one, True)]
    with pytest.raises(
        lesson10.CheckFailed,
        match=r"2 nodes: expected one rank of cn1 reading "
        r"the archive, got 2 \['rank 0 on cn1', 'rank 1 on cn1'\]",
    ):
        lesson10._judge(both, base, "2 nodes")
    early = [_report("cn1", 0, one, True), _report("cn1", 1, one, False, whole=1)]
    with pytest.raises(lesson10.CheckFailed, match="got 1: a rank must wait until the copy"):
        lesson10._judge(early, base, "2 nodes")
    elsewhere = [_report("cn1", 0, "/var/tmp/x", True)]
    with pytest.raises(lesson10.CheckFailed, match=r"expected a folder under .*cn1, got /var"):
        lesson10._judge(elsewhere, base, "2 nodes")
    # both ranks unpacked at once and one of them tripped over the other's folders: the
    # missing lock is what the learner is told, not the clash it caused
    clash = [_report("cn1", 0, one, True), {**_report("cn1", 1, one, True), "error": "OSError"}]
    with pytest.raises(lesson10.CheckFailed, match="one rank of cn1 reading the archive, got 2"):
        lesson10._judge(clash, base, "2 nodes")
    raised = [_report("cn1", 0, one, True), {**_report("cn1", 1, one, False), "error": "KeyError"}]
    with pytest.raises(lesson10.CheckFailed, match="rank 1 on cn1: stage_dataset raised KeyError"):
        lesson10._judge(raised, base, "2 nodes")


def test_10_1_a_stub_is_not_attempted_and_a_non_function_fails():
    assert run_check("10.1", stub).verdict == NOT_ATTEMPTED
    assert run_check("10.1", "not a function").message == "expected a function, got str"


def test_the_excerpts_the_checks_bring_are_all_kinds():
    assert sorted(e.kind for e in EXCERPTS.values()) == sorted(["p2p", "ib-gdr", "ib", "socket"])
