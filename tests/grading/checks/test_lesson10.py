"""Lesson 10 checkers: each passes on the reference answer with the learner's own runs, fails with
a useful message on known-wrong answers and forged runs, says "not attempted yet" for a stub
and for a missing run. The runs are given here as the files they leave in runs/10 (records,
logs, the staging step's results); 10.1's own processes and the real study are in
tests/integration/test_lab_checks.py."""

import json
import os
import re
from pathlib import Path

import pytest
from lab_fixtures import record

from course_utils import processes
from course_utils.grading import NOT_ATTEMPTED, held_out_cases, run_check
from course_utils.grading.checks import lesson10, lesson10_cases
from course_utils.grading.exercises import run_held_out
from course_utils.grading.judge.outside import Outside
from course_utils.lab import cluster, run_records, small_files, staging, transport
from course_utils.lab.nccl_excerpts import EXCERPTS

SCRIPT = cluster.SCRIPTS["scaling"].read_text()
WORK = lesson10.scaling.WORK


def stub(*args):
    raise NotImplementedError("Exercise 10.k")


def losses(lr: float) -> list[float]:
    """What a 1-rank run of lab_train at `lr` logs first: the judge's own training, then more."""
    return [*lesson10_cases.first_losses(lr, 32, lesson10.FIRST_LOSSES), 2.0, 1.9, 1.8, 1.7]


def study(folder, text=SCRIPT, efficiencies=None, last=(2.2, 0.9, 2.4), launcher="local"):
    """runs/10 after the study ran `text`: four shapes, a sweep of three, the 2-node log."""
    efficiencies = efficiencies or {"1x2": 0.9, "1x4": 0.85, "2x2": 0.6}
    digest = cluster.digest(text)
    runs = [record("1x1", 1000.0, script=digest)]
    for name, eff in efficiencies.items():
        ranks = {"1x2": 2, "1x4": 4, "2x2": 4}[name]
        runs.append(record(name, 1000.0 * ranks * eff, script=digest))
    for lr, loss in zip(cluster.LRS, last):
        run = record(f"lr-{lr:g}", 900.0, study="sweep", lr=lr, script=digest)
        run["loss"]["last"] = loss
        runs.append(run)
    for run in runs:
        run["label"]["launcher"] = launcher
        run["losses"] = losses(run["configuration"]["lr"])
        run_records.save(run, folder / "records")
    gloo = transport.GLOO_LINE.format(
        rank=0, peer=2, interface="lo", local="127.0.0.1:1", remote="127.0.0.1:2"
    )
    logs = folder / "records" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "2x2.log").write_text(f"rank 0/4 joined\n{gloo}\nrecord 2x2: 2,400 images/s\n")
    return folder


@pytest.fixture
def runs(tmp_path):
    return study(tmp_path)


# ---- 10.1: the staging step's results (the check's own processes: integration tests) -------


def stage_dataset(archive, environ):  # the solution's shape; only its source is read here
    return environ


SOURCE = lesson10.notebook_code.source(stage_dataset)


def staged(folder, change=None):
    """The staging step's rank*.json as 2 nodes x 2 ranks of `stage_dataset` wrote them."""
    out = folder / "staging"
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(4):
        node = f"node{rank // 2}"
        result = {
            "rank": rank,
            "node": node,
            "path": f"/tmp/lab-local-1-1/{node}",
            "copied": rank % 2 == 0,
            "answer": lesson10.notebook_code.digest(SOURCE),
            "digest": small_files.content_digest(),
            "seconds": 0.1,
            "world_size": 4,
            "ranks_on_node": 2,
        }
        result.update((change or {}).get(rank, {}))
        (out / f"rank{rank}.json").write_text(json.dumps(result))
    return folder


def judge_staging(folder):
    results = [json.loads(p.read_text()) for p in sorted((folder / "staging").glob("rank*"))]
    lesson10._judge_staging_step(results, SOURCE)


def test_10_1_the_staging_step_with_the_learners_function_is_judged(tmp_path):
    judge_staging(staged(tmp_path))  # raises nothing


@pytest.mark.parametrize(
    "change, message",
    [
        ({1: {"copied": True}}, "expected one rank per node reading the archive, got {'node0': 2"),
        ({1: {"path": "/tmp/other"}}, "expected one folder per node, got"),
        ({2: {"digest": "0123"}}, "expected every rank's copy whole (512 images), got not"),
        ({0: {"answer": "another"}}, "expected results of the stage_dataset in your cell now"),
        ({3: {"error": "KeyError: 'TMPDIR'"}}, "rank 3: stage_dataset raised KeyError"),
    ],
)
def test_10_1_a_staging_step_that_went_wrong_fails(tmp_path, change, message):
    with pytest.raises(lesson10.CheckFailed, match=re.escape(message)):
        judge_staging(staged(tmp_path, change))


def test_10_1_without_its_staging_step_is_not_attempted(tmp_path):
    """The check reads the learner's run first: no results, not attempted (no process starts)."""
    result = run_check("10.1", stage_dataset, tmp_path)
    assert result.verdict == NOT_ATTEMPTED and result.message.startswith(
        "run the staging step first: the exercise cell ends with cluster.stage_and_measure"
    )
    assert run_check("10.1", stub, tmp_path).verdict == NOT_ATTEMPTED
    assert run_check("10.1", "not a function", tmp_path).verdict == "failed"


def _report(node, rank, path, read, whole=3, expected=3, digest="d"):
    return {
        "who": f"rank {rank} on {node}",
        "node": node,
        "path": path,
        "is_dir": True,
        "whole": whole,
        "expected": expected,
        "read_archive": read,
        "digest": digest,
    }


def test_10_1_judges_one_reader_per_node_and_complete_copies(tmp_path):
    base = str(tmp_path / "cn{node}")
    one, two = str(tmp_path / "cn1" / "j" / "cn1"), str(tmp_path / "cn2" / "j" / "cn2")
    for folder in (one, two):  # what the ranks left on disk, which the judge reads itself
        (Path(folder) / staging.IMAGES).mkdir(parents=True)
        (Path(folder) / staging.IMAGES / "00000.bin").write_bytes(b"archive")
    digest = staging.content_digest(Path(one) / staging.IMAGES)
    seen = Outside(os.getpid())
    good = [
        _report("cn1", 0, one, True),
        _report("cn1", 1, one, False),
        _report("cn2", 2, two, False),
        _report("cn2", 3, two, True),
    ]
    lesson10._judge(good, base, "2 nodes", digest, seen)  # raises nothing
    judge = lesson10_cases.judge_ranks
    both = [_report("cn1", 0, one, True), _report("cn1", 1, one, True)]
    with pytest.raises(
        lesson10.CheckFailed,
        match=r"2 nodes: expected one rank of cn1 reading "
        r"the archive, got 2 \['rank 0 on cn1', 'rank 1 on cn1'\]",
    ):
        judge(both, base, "2 nodes")
    early = [_report("cn1", 0, one, True), _report("cn1", 1, one, False, whole=1)]
    with pytest.raises(lesson10.CheckFailed, match="got 1: a rank must wait until the copy"):
        judge(early, base, "2 nodes")
    elsewhere = [_report("cn1", 0, "/var/tmp/x", True)]
    with pytest.raises(lesson10.CheckFailed, match=r"expected a folder under .*cn1, got /var"):
        judge(elsewhere, base, "2 nodes")
    # both ranks unpacked at once and one of them tripped over the other's folders: the
    # missing lock is what the learner is told, not the clash it caused
    clash = [_report("cn1", 0, one, True), {**_report("cn1", 1, one, True), "error": "OSError"}]
    with pytest.raises(lesson10.CheckFailed, match="one rank of cn1 reading the archive, got 2"):
        judge(clash, base, "2 nodes")
    raised = [_report("cn1", 0, one, True), {**_report("cn1", 1, one, False), "error": "KeyError"}]
    with pytest.raises(lesson10.CheckFailed, match="rank 1 on cn1: stage_dataset raised KeyError"):
        judge(raised, base, "2 nodes")
    # a folder that holds another job's copy (or made-up files), whatever the ranks reported
    (Path(two) / staging.IMAGES / "00000.bin").write_bytes(b"made up")
    with pytest.raises(lesson10.CheckFailed, match="expected the archive's files, whole"):
        lesson10._judge(good, base, "2 nodes", digest, seen)


# ---- 10.2 ------------------------------------------------------------------------------------


def script(text=SCRIPT):
    return lambda: text


def test_10_2_passes_on_the_study_its_script_drove(runs):
    result = run_check("10.2", script(), runs)
    assert result.passed, result.message
    assert result.message.endswith("[via local ranks: no Slurm here]")
    assert run_check("10.2", stub, runs).verdict == NOT_ATTEMPTED


def test_10_2_without_the_study_is_not_attempted(tmp_path):
    result = run_check("10.2", script(), tmp_path)
    assert result.verdict == NOT_ATTEMPTED and result.message.startswith(
        "run the study first: the last lines of exercise 10.2's cell run your script"
    )


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
            "#SBATCH --mem-per-cpu=1G\n",
            "",
            "expected memory asked for (--mem-per-cpu=1G, or --mem: sacct's memory efficiency",
        ),
        (
            "#SBATCH --gpus-per-node=1\n",
            "",
            "expected --gpus-per-node=1 in the header (a GPU per task for its one task; the "
            "study gives --gpus-per-node=N with N tasks per node), got no GPU request",
        ),
        (
            "#SBATCH --gpus-per-node=1",
            "#SBATCH --gpus-per-task=1",
            "expected --gpus-per-node=1 (a GPU per task; the study gives --gpus-per-node=N with "
            "N tasks per node), or --gpus-per-task=1 with srun --gpu-bind=none or "
            "--gres-flags=allow-task-sharing (Slurm 23.11 and later): --gpus-per-task alone "
            "binds each task to its own GPU, and where Slurm confines devices "
            "(ConstrainDevices=yes, usual at GPU centres)",
        ),
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
            '-c "$SLURM_CPUS_PER_TASK" ',
            '-c "$SLURM_CPUS_PER_TASK" --gpu-bind=closest ',
            "expected no --gpu-bind=closest: a binding gives each task GPUs of its own, and "
            "where Slurm confines devices",
        ),
        (
            "-m course_utils.jobs.lab_train",
            "-m course_utils.jobs.ddp_train",
            'expected srun starting python -m course_utils.jobs.lab_train "$@", got '
            "course_utils.jobs.ddp_train",
        ),
    ],
)
def test_10_2_wrong_scripts_fail_before_the_records_are_read(runs, old, new, message):
    assert old in SCRIPT
    result = run_check("10.2", script(SCRIPT.replace(old, new)), runs)
    assert result.verdict == "failed" and result.message.startswith(message), result.message


@pytest.mark.parametrize(
    "fix", ["--gpu-bind=none", "--gres-flags=allow-task-sharing"], ids=["bind-none", "sharing"]
)
def test_10_2_gpus_per_task_with_a_fix_keeps_the_rules(runs, fix):
    """The rules let it through: what fails is only that the study ran another script."""
    fixed = SCRIPT.replace("#SBATCH --gpus-per-node=1", "#SBATCH --gpus-per-task=1").replace(
        '-c "$SLURM_CPUS_PER_TASK" ', f'-c "$SLURM_CPUS_PER_TASK" {fix} '
    )
    result = run_check("10.2", script(fixed), runs)
    assert "got records of another" in result.message, result.message


def test_10_2_records_of_another_script_fail(runs):
    other = SCRIPT.replace("#SBATCH --time=00:10:00", "#SBATCH --time=00:12:00")
    result = run_check("10.2", script(other), runs)
    assert result.message.startswith(
        "run the study first: the last lines of exercise 10.2's cell run your script: expected "
        "records of the script scaling_script returns now, got records of another"
    )


def test_10_2_a_typed_in_record_fails_on_the_losses_the_check_trains(tmp_path):
    folder = study(tmp_path)
    path = folder / "records" / "scaling" / "1x1.json"
    typed = json.loads(path.read_text())
    typed["losses"] = [2.3, 2.29, 2.28, 2.27, 2.26, 2.2]  # plausible, and made up
    path.write_text(json.dumps(typed))
    result = run_check("10.2", script(), folder)
    assert result.message.startswith("run 1x1: expected first losses [2.3079, "), result.message


def test_10_2_a_missing_shape_or_sweep_fails(tmp_path):
    folder = study(tmp_path)
    (folder / "records" / "scaling" / "2x2.json").unlink()
    result = run_check("10.2", script(), folder)
    assert result.message == (
        "expected runs ['1x1', '1x2', '1x4', '2x2'], got ['1x1', '1x2', '1x4']"
    )


def _sacct(state, name):
    def answer(cmd):
        job = cmd[cmd.index("-j") + 1]
        line = f"{job}|{name}|{state}|0:0|00:00:10|4|4000M||00:00:30|cpu=4,mem=4000M,node=1|1|"
        return line + "\n"

    return answer


def test_10_2_slurm_runs_are_read_from_sacct(tmp_path, fake_commands):
    """Where the study's runs were Slurm jobs, the scheduler's record decides: each job
    completed, under the name that carries the script's digest, on the run's nodes."""
    folder = study(tmp_path, launcher="slurm")
    names = {}
    for path in (folder / "records").glob("*/*.json"):
        run = json.loads(path.read_text())
        shape = run["name"] if run["study"] == "scaling" else "sweep"
        run["label"]["job"] = f"{40 + len(names)}"
        names[run["label"]["job"]] = (
            cluster.job_name(shape, SCRIPT),
            run["configuration"]["nodes"],
        )
        path.write_text(json.dumps(run))

    def sacct(state="COMPLETED", rename=None):
        def answer(cmd):
            job = cmd[cmd.index("-j") + 1]
            name, nodes = names[job]
            fields = [job, rename or name, state, "0:0", "00:00:10", "4", "4000M", "", "00:00:30"]
            line = "|".join([*fields, "cpu=4,mem=4000M,node=1", str(nodes), ""]) + "\n"
            return processes.Finished(tuple(cmd), 0, line, "", 0.1)

        return answer

    fake_commands({"sacct": sacct()})
    result = run_check("10.2", script(), folder)
    assert result.passed and result.message.endswith("agrees [via slurm]"), result.message
    fake_commands({"sacct": sacct(state="FAILED")})
    failed = run_check("10.2", script(), folder).message
    assert "expected a COMPLETED job (sacct), got FAILED" in failed
    fake_commands({"sacct": sacct(rename="lab-1x1-something")})
    renamed = run_check("10.2", script(), folder).message
    assert "expected the job named lab-" in renamed and "(sacct), got lab-1x1-something" in renamed
    fake_commands({"sacct": processes.Finished(("sacct",), 0, "", "", 0.1)})
    unknown = run_check("10.2", script(), folder).message
    assert re.search(r"expected sacct's record of job \d+, got none", unknown), unknown


# ---- 10.3 ------------------------------------------------------------------------------------


def diagnose_transport(log):
    kinds = set()
    for via in re.findall(r" via (.+)", log):
        if via.startswith(("NET/Socket", "TCP/")):
            kinds.add("socket")
        elif via.startswith("NET/IB"):
            kinds.add("ib-gdr" if "/GDRDMA" in via else "ib")
        elif via.startswith("NET/"):
            kinds.add("plugin")
        elif via.startswith("SHM"):
            kinds.add("shm")
        elif via.startswith("P2P"):
            kinds.add("p2p")
    return next(k for k in ("socket", "ib", "ib-gdr", "plugin", "shm", "p2p") if k in kinds)


def test_10_3_names_the_transport_in_every_log(runs):
    assert run_check("10.3", diagnose_transport, runs).passed
    assert run_check("10.3", stub, runs).verdict == NOT_ATTEMPTED


def test_10_3_without_the_learners_study_and_its_log_is_not_attempted(tmp_path):
    result = run_check("10.3", diagnose_transport, tmp_path)
    assert result.verdict == NOT_ATTEMPTED and "your study's records" in result.message
    folder = study(tmp_path)
    (folder / "records" / "logs" / "2x2.log").unlink()
    no_log = run_check("10.3", diagnose_transport, folder)
    assert no_log.verdict == NOT_ATTEMPTED and "your 2-node run's log" in no_log.message
    (folder / "records" / "logs" / "2x2.log").write_text("rank 0 crashed\n")
    unfinished = run_check("10.3", diagnose_transport, folder)
    assert unfinished.message.startswith("your own 2-node run's log: expected a finished 2-node")


def test_10_3_and_10_4_refuse_records_typed_in(tmp_path):
    """Records whose 1-rank runs' losses the judge's own training does not give: typed in."""
    folder = study(tmp_path)
    path = folder / "records" / "sweep" / "lr-0.1.json"
    typed = json.loads(path.read_text())
    typed["losses"] = [2.30, 2.29, 2.28, 2.27, 2.26]
    path.write_text(json.dumps(typed))
    for exercise, answer in (("10.3", diagnose_transport), ("10.4", decide)):
        result = run_check(exercise, answer, folder)
        assert result.message.startswith("your run lr-0.1: expected first losses"), result.message


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


def test_10_3_a_network_plugins_link_is_named_plugin(runs):
    """An answer that knows IB and sockets only: the plugin excerpt's P2P link within a node
    would answer 'p2p' though the job crosses nodes through the plugin."""

    def no_plugin(log):
        return diagnose_transport(re.sub(r"via NET/(?!IB|Socket)\S+", "via ?", log))

    result = run_check("10.3", no_plugin, runs)
    assert result.message == (
        "the constructed excerpt 'plugin': expected 'plugin', got 'p2p': across nodes the "
        "network link decides, not the links within a node"
    ), result.message


def test_10_3_the_held_out_plugin_excerpt_is_not_in_the_notebook():
    assert "AWS Libfabric" not in "".join(e.text for e in EXCERPTS.values())
    assert transport.diagnose(lesson10.HELD_OUT_PLUGIN) == "plugin"
    assert not any(k.kind == "p2p" for k in transport.links(lesson10.HELD_OUT_PLUGIN))


def test_10_3_held_out_catches_an_answer_that_knows_one_plugin_name(runs):
    """Passes every visible log (Libfabric), yet takes 'AWS Libfabric' for InfiniBand."""

    def one_name(log):
        return "ib" if "AWS Libfabric" in log else diagnose_transport(log)

    caught = held_out_catches("10.3", diagnose_transport, one_name, runs)
    assert caught.startswith("a held-out excerpt (a network plugin of another name): expected")


def held_out_catches(exercise_id, right, wrong, folder, seeds=range(3)):
    """As tests/grading/checks/conftest.py's fixture, with the check cell's folder passed on:
    `wrong` passes the visible check, `right` every held-out case, and `wrong` fails one of
    each seed's. The first failure's message."""
    cases = held_out_cases(exercise_id)
    assert cases >= 1
    assert run_check(exercise_id, wrong, folder).passed, (
        "the wrong answer must pass what is visible"
    )
    for seed in seeds:
        assert run_held_out(exercise_id, seed, right, folder).passed == cases, seed
    caught = [run_held_out(exercise_id, seed, wrong, folder) for seed in seeds]
    assert all(r.passed < r.cases for r in caught), caught
    return caught[0].failures[0]


def test_10_3_held_out_logs_catch_a_table_of_the_visible_answers(runs):
    own = (runs / "records" / "logs" / "2x2.log").read_text()
    visible = {log: want for _, log, want in lesson10._transport_cases(own)}
    caught = held_out_catches("10.3", diagnose_transport, visible.get, runs)
    assert caught.startswith("a log the check drew: expected one of"), caught


# ---- 10.4 ------------------------------------------------------------------------------------


def decide(records, sweep, work, deadline_hours):
    rates = {}
    for r in records:
        n = r["configuration"]["ranks"]
        rates[n] = max(rates.get(n, 0.0), r["throughput"])
    gpus = lesson10.how_many.choose(rates, work, deadline_hours).gpus
    return gpus, min(sweep, key=lambda r: r["loss"]["last"])["configuration"]["lr"]


def test_10_4_on_own_records_and_brought_ones(runs):
    assert run_check("10.4", decide, runs).passed
    assert run_check("10.4", stub, runs).verdict == NOT_ATTEMPTED
    assert run_check("10.4", decide, runs.parent / "none").verdict == NOT_ATTEMPTED


def test_10_4_the_old_rule_without_the_deadline_fails(runs):
    def most_efficient(records, sweep, work, deadline_hours):
        return decide(records, sweep, work, None)

    result = run_check("10.4", most_efficient, runs)
    assert result.message.startswith("your own records, a deadline of "), result.message
    assert "expected 2 GPUs (the fewest GPUs that finish within" in result.message


def test_10_4_speed_up_instead_of_efficiency_and_the_first_shape_of_a_count_fail(runs):
    def speedups(records, sweep, work, deadline_hours):
        rates = {r["configuration"]["ranks"]: r["throughput"] for r in records}  # the last shape
        rates = {n: rate / n for n, rate in rates.items()}  # per GPU: not a job's rate
        return lesson10.how_many.choose(rates, work, deadline_hours).gpus, 0.1

    result = run_check("10.4", speedups, runs)
    assert result.verdict == "failed" and "GPUs (" in result.message


def test_10_4_the_learning_rate_is_the_lowest_last_loss(runs):
    def fastest(records, sweep, work, deadline_hours):  # the quickest task, not the best
        return decide(records, sweep, work, deadline_hours)[0], sweep[0]["configuration"]["lr"]

    result = run_check("10.4", fastest, runs)
    assert (
        result.message
        == "your own records and sweep: expected lr 0.1 (the lowest last loss), got 0.02"
    )


def test_10_4_held_out_sets_catch_a_table_of_the_visible_answers(runs):
    own = run_records.load(runs / "records", "scaling")
    sweep = run_records.load(runs / "records", "sweep")
    visible = {
        (tuple(r["throughput"] for r in records), deadline): decide(records, done, WORK, deadline)
        for _, records, done, deadline in lesson10_cases.decide_cases(own, sweep)
    }

    def table(records, sweep, work, deadline_hours):
        return visible.get((tuple(r["throughput"] for r in records), deadline_hours), (1, 0.1))

    caught = held_out_catches("10.4", decide, table, runs)
    assert caught.startswith("drawn records {"), caught


def test_the_excerpts_the_checks_bring_are_all_kinds():
    assert sorted(e.kind for e in EXCERPTS.values()) == sorted(
        ["p2p", "ib-gdr", "ib", "socket", "plugin"]
    )
    assert set(transport.TAUGHT) == {"p2p", "shm", "ib-gdr", "ib", "socket", "plugin"}
