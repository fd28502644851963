"""Lesson 10 checkers: each passes on the reference answer with the learner's own jobs and runs,
fails with a useful message on known-wrong answers, jobs and forged runs, says "not attempted
yet" for a stub and for a missing run or a job still queued. The learner's jobs are given as
Slurm's records (`accounting.JobRecord`, injected where sacct would be read), the runs as the
files they leave (records, logs); the check's own processes (10.1's cases, 10.2's study on this
machine) start only in tests/integration/test_lab_checks.py."""

import ast
import dataclasses
import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from lab_fixtures import record

from course_utils import accounting, notebook_code
from course_utils.grading import NOT_ATTEMPTED, held_out_cases, run_check
from course_utils.grading.checks import lesson10, lesson10_cases, lesson10_jobs, slurm_record
from course_utils.grading.exercises import run_held_out
from course_utils.grading.judge.outside import Outside
from course_utils.grading.notebooks import course_meta
from course_utils.grading.probes import lesson10 as probes
from course_utils.lab import cluster, run_records, scripts, staging, transport
from course_utils.lab.nccl_excerpts import EXCERPTS
from course_utils.paths import REPO_ROOT

SCRIPT = cluster.SCRIPTS["scaling"].read_text()
WORK = lesson10.scaling.WORK


def stub(*args):
    raise NotImplementedError("Exercise 10.k")


def losses(lr: float) -> list[float]:
    """What a 1-rank run of lab_train at `lr` logs first: the judge's own training, then more."""
    first = lesson10_cases.first_losses(lr, 32, run_records.COMMENT_LOSSES)
    return [*first, 2.0, 1.9, 1.8, 1.7]


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


# ---- the learner's jobs, as Slurm's accounting records them -----------------------------------


@pytest.fixture
def sacct(monkeypatch):
    """Slurm's records of the learner's jobs, injected where the checks read sacct:
    `sacct(*records)`; an array's tasks are named by the array's id. The course: learner1's."""
    found: dict[str, list[accounting.JobRecord]] = {}
    monkeypatch.setattr(accounting, "job_records", lambda job_id, timeout=30: found.get(job_id, []))
    slurm_record.set_course(slurm_record.Course("learner1", "course"))

    def install(*records):
        found.clear()
        for r in records:
            found.setdefault(r.job_id.split("_")[0], []).append(r)

    yield install
    slurm_record._COURSE.clear()
    slurm_record._CLAIMED.clear()


def job(job_id, nodes=1, tasks=1, *, script=SCRIPT, comment="", state="COMPLETED", user="learner1",
        minutes=(0, 1), nodelist=None, line="sbatch x.sh"):  # fmt: skip
    """A job as sacct records it: its own line, the batch step, one srun step of `tasks` tasks;
    it ran from minute `minutes[0]` to `minutes[1]` on `nodelist` (cn1, or cn[1-2])."""
    tres = {"cpu": str(4 * tasks), "mem": f"{4 * tasks}G", "node": str(nodes)}
    cpus = 4 * tasks
    steps = (
        accounting.Step(job_id, "lab", state, 0, 9.0, cpus, 4096.0, None, 2.0, tres, nodes, None),
        accounting.Step(f"{job_id}.batch", "batch", state, 0, 9.0, 4, None, 99.0, 1.0, tres, 1, 1),
        accounting.Step(
            f"{job_id}.0", "py", state, 0, 8.0, cpus, None, 99.0, 1.0, tres, nodes, tasks
        ),
    )
    started, ended = (f"2026-11-29T08:{m:02d}:00" for m in minutes)
    return accounting.JobRecord(
        job_id=job_id, user=user, account="course", submitted="2026-11-29T07:59:00",
        submit_line=line, comment=comment, runs=(state,), step_lines=(), script=script,
        steps=steps, started=started, ended=ended,
        nodelist=nodelist or ("cn1" if nodes == 1 else "cn[1-2]"),
    )  # fmt: skip


def lab_comment(name, study="scaling", lr=0.05, throughput=1000.0, typed=None, last=2.0):
    """What lab_train's rank 0 leaves in its job's comment for this run (`typed`: losses
    made up instead of the ones the run gives)."""
    run = record(name, throughput, study=study, lr=lr)
    run["losses"] = losses(lr) if typed is None else typed
    run["loss"]["last"] = last
    return "course:" + run_records.to_comment(run)


def study_jobs(text=SCRIPT, sweep=(0.02, 0.1, 0.3), **changes):
    """The learner's honest study as sacct records it: the four shapes, one after another
    (jobs 41-44, minutes 0-4), and the sweep as array 50; `changes` replace one job by id."""
    runs = []
    for i, (name, (nodes, per)) in enumerate(SHAPES_RUN.items()):
        comment = lab_comment(name, throughput=1000.0 * nodes * per * 0.9)
        runs.append(job(str(41 + i), nodes, nodes * per, script=text, comment=comment,
                        minutes=(i, i + 1)))  # fmt: skip
    for t, (lr, last) in enumerate(zip(sweep, (2.2, 0.9, 2.4))):
        comment = lab_comment(f"lr-{lr:g}", "sweep", lr, last=last)
        runs.append(job(f"50_{t}", script=text, comment=comment, minutes=(0, 2)))
    return [changes.get(r.job_id, r) for r in runs]


SHAPES_RUN = {"1x1": (1, 1), "1x2": (1, 2), "1x4": (1, 4), "2x2": (2, 2)}
NAMED = ["41", "42", "43", "44", "50"]


# ---- 10.1: the staging job on the record (the check's own processes: integration tests) ------


def stage_dataset(archive, environ):  # the solution's shape; only its source is read here
    return environ


SOURCE = notebook_code.source(stage_dataset)
DIGEST = notebook_code.digest(SOURCE)
STAGING = cluster.SCRIPTS["staging"].read_text()
STAGING_LINE = f"sbatch --parsable lab_staging.sh --answer s.py --digest {DIGEST}"


def staging_job(**changes):
    fields = {"nodes": 2, "tasks": 4, "script": STAGING, "line": STAGING_LINE, **changes}
    return job("30", **fields)


def test_10_1_the_learners_staging_job_on_the_record_is_judged(sacct):
    sacct(staging_job())
    lesson10_jobs.staging_job("30", SOURCE)  # raises nothing
    assert slurm_record._CLAIMED == {"30": "10.1"}


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"user": "learner2"}, "job 30: expected a job submitted by learner1, got one submitted"),
        ({"state": "FAILED"}, "job 30: expected a COMPLETED job, got FAILED"),
        ({"nodes": 1}, "job 30: expected a step of 4 tasks on 2 nodes (srun), got 1 node x 4"),
        ({"script": SCRIPT}, "job 30: expected a script that runs python -m course_utils.jobs."),
        (
            {"line": "sbatch lab_staging.sh --answer s.py --digest 0123"},
            f"job 30: expected --digest {DIGEST}, the digest of the stage_dataset in your cell "
            "now (the sbatch line the lesson prints), got 0123: another version of it; submit it "
            "again",
        ),
        ({"line": f"sbatch s.sh --digest {DIGEST}"}, "job 30: expected --answer with your"),
    ],
)
def test_10_1_a_staging_job_that_is_not_the_answer_fails_before_any_process(
    sacct, changes, message
):
    """Judged before the check starts its own processes: the fast lane refuses them."""
    sacct(staging_job(**changes))
    result = run_check("10.1", stage_dataset, None, ["30"])
    assert result.verdict == "failed" and result.message.startswith(message), result.message


def test_10_1_a_staging_job_still_queued_is_not_attempted_yet(sacct):
    sacct(staging_job(state="PENDING"))
    result = run_check("10.1", stage_dataset, None, ["30"])
    assert result.verdict == NOT_ATTEMPTED and "has not ended yet (30 PENDING)" in result.message


def test_10_1_a_stub_or_no_function_is_not_a_run(tmp_path):
    assert run_check("10.1", stub, tmp_path, []).verdict == NOT_ATTEMPTED
    assert run_check("10.1", "not a function", tmp_path, []).verdict == "failed"
    bad = run_check("10.1", stage_dataset, tmp_path, ["Submitted batch job 30"])
    assert bad.message.startswith("STAGING_JOBS: expected job ids as sbatch --parsable prints")


def test_where_the_course_ran_on_the_cluster_10_1_and_10_2_name_their_jobs(tmp_path):
    slurm_record.set_course(slurm_record.Course("learner1", "course", required=True))
    try:
        staged = run_check("10.1", stage_dataset, tmp_path, [])
        studied = run_check("10.2", script(), tmp_path, [])
    finally:
        slurm_record._COURSE.clear()
    assert staged.verdict == studied.verdict == NOT_ATTEMPTED
    assert staged.message == (
        "submit your job on the cluster first (bash runs/10/jobs/submit_staging.sh prints its "
        "id), and name its id"
    )
    assert "submit your job on the cluster first (bash runs/10/jobs/submit_study.sh" in (
        studied.message
    )


def test_lesson_10s_exercise_cells_define_answers_and_run_nothing():
    """Nothing in an exercise cell stages, submits or sweeps for the learner: each only defines
    the answer (functions, and the imports they use) and the lists of the learner's job ids."""
    nb = nbformat.read(REPO_ROOT / "solutions" / "10_cluster_lab.ipynb", as_version=4)
    cells = [c for c in nb.cells if course_meta(c).get("role") == "exercise"]
    assert [course_meta(c)["does"] for c in cells] == ["run", "run", "decide", "decide"]
    lists = []
    for cell in cells:
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.Assign):
                assert isinstance(node.value, ast.List) and not node.value.elts, cell.source
                lists += [t.id for t in node.targets]
            else:
                kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef)
                assert isinstance(node, kinds), ast.get_source_segment(cell.source, node)
    assert lists == ["STAGING_JOBS", "STUDY_JOBS"]


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


# ---- 10.2: the study on the record ---------------------------------------------------------


def script(text=SCRIPT):
    return lambda: text


def test_10_2_passes_on_the_learners_jobs_as_sacct_recorded_them(sacct):
    sacct(*study_jobs())
    result = run_check("10.2", script(), None, NAMED)
    assert result.passed, result.message
    assert result.message.startswith("[via slurm] your script ran the four shapes one after")
    assert "sacct 41: 1 node x 1 task, 4 CPUs, COMPLETED, script stored" in result.evidence
    assert "sacct 50_2: 1 node x 1 task" in result.evidence and "sacct 44: 2 nodes x 4 tasks" in (
        result.evidence
    )
    assert run_check("10.2", stub, None, NAMED).verdict == NOT_ATTEMPTED


def test_10_2_a_cpu_runs_variant_of_the_script_is_the_learners_script(sacct):
    variant = scripts.cpu_variant(SCRIPT)
    sacct(*[dataclasses.replace(r, script=variant) for r in study_jobs()])
    assert run_check("10.2", script(), None, NAMED).passed


TYPED = [2.3, 2.29, 2.28, 2.27, 2.26]  # plausible first losses, and made up


def _shifted(r, minutes):
    started, ended = (f"2026-11-29T08:{m:02d}:00" for m in minutes)
    return dataclasses.replace(r, started=started, ended=ended)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: {"41": dataclasses.replace(r["41"], user="learner2")},
         "job 41: expected a job submitted by learner1, got one submitted by learner2"),
        (lambda r: {"42": dataclasses.replace(r["42"], runs=("FAILED",))},
         "job 42: expected a COMPLETED job, got FAILED"),
        (lambda r: {"43": dataclasses.replace(r["43"], script=SCRIPT + "# mine\n")},
         "job 43: expected the script scaling_script returns now, as Slurm stored it, got "
         "another script"),
        (lambda r: {"43": dataclasses.replace(r["43"], script=None)},
         "job 43: expected the script scaling_script returns now, as Slurm stored it, got no "
         "script stored (AccountingStoreFlags=job_script)"),
        (lambda r: {"43": dataclasses.replace(r["43"], comment="")},
         "job 43: expected the result rank 0 of course_utils.jobs.lab_train leaves in its job's "
         "comment, got no comment (did rank 0 finish?)"),
        (lambda r: {"43": job("43", 1, 2, comment=lab_comment("1x4"), minutes=(2, 3))},
         "job 43: expected a result of the 1 node(s) x 2 task(s) sacct recorded, got one of 1 x 4"),
        (lambda r: {"43": job("43", 1, 2, comment=lab_comment("1x2"), minutes=(2, 3))},
         "STUDY_JOBS: expected one job of each shape, got 1x2 twice (jobs 42 and 43)"),
        (lambda r: {"42": _shifted(r["42"], (0, 2))},
         "jobs 41 (1x1) and 42 (1x2): expected shapes that do not share a node at the same time, "
         "got both on cn1 at once"),
        (lambda r: {"41": job("41", comment=lab_comment("1x1", typed=TYPED))},
         "job 41 (1x1): expected first losses [2.3079, "),
    ],
)  # fmt: skip
def test_10_2_a_job_that_is_not_the_study_fails_with_the_reason(sacct, change, message):
    honest = {r.job_id: r for r in study_jobs()}
    sacct(*{**honest, **change(honest)}.values())
    result = run_check("10.2", script(), None, NAMED)
    assert result.verdict == "failed" and result.message.startswith(message), result.message


def test_10_2_a_missing_shape_or_sweep_fails(sacct):
    sacct(*study_jobs())
    no_sweep = run_check("10.2", script(), None, NAMED[:4])
    assert no_sweep.message == (
        "STUDY_JOBS: expected the sweep as one job array of 2 or more tasks (sbatch "
        "--array=0-2%2 ...), got no sweep"
    )
    slurm_record._CLAIMED.clear()
    no_2x2 = run_check("10.2", script(), None, ["41", "42", "43", "50"])
    assert no_2x2.message == (
        "STUDY_JOBS: expected jobs of the shapes ['1x1', '1x2', '1x4', '2x2'] (nodes x tasks per "
        "node), got ['1x1', '1x2', '1x4']"
    )
    sacct(*study_jobs(sweep=(0.1,)))
    one_task = run_check("10.2", script(), None, NAMED)
    assert one_task.message.startswith("STUDY_JOBS: expected the sweep as one job array of 2")


def test_10_2_shapes_apart_in_time_or_each_exclusive_pass(sacct):
    honest = {r.job_id: r for r in study_jobs()}
    unknown = dataclasses.replace(honest["42"], started="", ended="")
    sacct(*{**honest, "42": unknown}.values())  # no times: only --exclusive says they were apart
    assert "ran on" not in run_check("10.2", script(), None, NAMED).message
    assert run_check("10.2", script(), None, NAMED).message.startswith("jobs 41 (1x1) and 42")
    slurm_record._CLAIMED.clear()
    exclusive = {k: dataclasses.replace(r, submit_line="sbatch --exclusive x.sh")
                 for k, r in honest.items()}  # fmt: skip
    sacct(
        *{
            **exclusive,
            "42": dataclasses.replace(unknown, submit_line="sbatch --exclusive x"),
        }.values()
    )
    assert run_check("10.2", script(), None, NAMED).passed


def test_10_2_a_job_still_queued_is_not_attempted_yet(sacct):
    sacct(*study_jobs(), job("44", 2, 4, state="PENDING"))
    result = run_check("10.2", script(), None, NAMED)
    assert result.verdict == NOT_ATTEMPTED and "job 44 has not ended yet" in result.message


# ---- 10.2: the script's rules, and the check's own study on this machine ---------------------


def judged(folder, text=SCRIPT):
    """10.2's verdict on the records the study of `text` left in `folder` (the check's own
    study writes them in a folder it made; here the test writes them)."""
    found = probes.study_files(folder)
    return lesson10._judge_study(found["records"], text, found["logs"])


def test_10_2_the_checks_own_study_is_judged_on_its_records(runs):
    assert [r["name"] for r in judged(runs)] == ["lr-0.02", "lr-0.1", "lr-0.3"]
    with pytest.raises(lesson10.CheckFailed, match="your script's study wrote no record"):
        judged(runs.parent / "none")


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
def test_10_2_wrong_scripts_fail_before_any_run(runs, old, new, message):
    assert old in SCRIPT
    result = run_check("10.2", script(SCRIPT.replace(old, new)), runs, [])
    assert result.verdict == "failed" and result.message.startswith(message), result.message


@pytest.mark.parametrize(
    "fix", ["--gpu-bind=none", "--gres-flags=allow-task-sharing"], ids=["bind-none", "sharing"]
)
def test_10_2_gpus_per_task_with_a_fix_keeps_the_rules(runs, fix):
    """The rules let it through: what fails is only that these records came of another script."""
    fixed = SCRIPT.replace("#SBATCH --gpus-per-node=1", "#SBATCH --gpus-per-task=1").replace(
        '-c "$SLURM_CPUS_PER_TASK" ', f'-c "$SLURM_CPUS_PER_TASK" {fix} '
    )
    assert scripts.scaling_script_problems(fixed) == []
    with pytest.raises(lesson10.CheckFailed, match="got records of another"):
        judged(runs, fixed)


def test_10_2_records_of_another_script_fail(runs):
    other = SCRIPT.replace("#SBATCH --time=00:10:00", "#SBATCH --time=00:12:00")
    with pytest.raises(lesson10.CheckFailed) as failed:
        judged(runs, other)
    assert str(failed.value) == (
        "your script's study: expected records of the script scaling_script returns, got records "
        "of another (does it return the same text every time?)"
    )


def test_10_2_a_typed_in_record_fails_on_the_losses_the_check_trains(tmp_path):
    folder = study(tmp_path)
    path = folder / "records" / "scaling" / "1x1.json"
    typed = json.loads(path.read_text())
    typed["losses"] = [2.3, 2.29, 2.28, 2.27, 2.26, 2.2]  # plausible, and made up
    path.write_text(json.dumps(typed))
    with pytest.raises(
        lesson10.CheckFailed, match=re.escape("run 1x1: expected first losses [2.3079, ")
    ):
        judged(folder)


def test_10_2_a_missing_shape_of_the_checks_study_fails(tmp_path):
    folder = study(tmp_path)
    (folder / "records" / "scaling" / "2x2.json").unlink()
    with pytest.raises(lesson10.CheckFailed) as failed:
        judged(folder)
    assert str(failed.value) == (
        "expected runs ['1x1', '1x2', '1x4', '2x2'], got ['1x1', '1x2', '1x4']"
    )


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


def test_10_3_decides_on_the_other_logs_where_the_learner_has_none_and_on_theirs_too(runs):
    """A decision on logs: the learner's own 2-node run's log is one case where it finished."""

    def not_theirs(log):  # right on every log but the learner's own run's (gloo over lo)
        return "ib" if "127.0.0.1:1 -> 127.0.0.1:2" in log else diagnose_transport(log)

    mine = run_check("10.3", not_theirs, runs)
    assert mine.message == "your own 2-node run's log: expected 'socket', got 'ib'"
    (runs / "records" / "logs" / "2x2.log").write_text("rank 0 crashed\n")  # no finished run
    assert run_check("10.3", not_theirs, runs).passed
    assert run_check("10.3", diagnose_transport, runs.parent / "none").passed
    assert run_check("10.3", diagnose_transport, None).passed


def test_10_3_reads_the_learners_2_node_job_log_before_their_local_one(runs):
    logs = runs / "jobs" / "logs"
    logs.mkdir(parents=True)
    ib = (
        "jobnode:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0\nrecord 2x2: x\n"
    )
    (logs / "2x2-44.out").write_text(ib)
    assert probes.two_node_log(runs) == ib

    def socket_for_theirs(log):
        return "socket" if "jobnode" in log else diagnose_transport(log)

    result = run_check("10.3", socket_for_theirs, runs)
    assert result.message == "your own 2-node run's log: expected 'ib', got 'socket'"


def test_10_4_decides_on_the_records_as_they_are(tmp_path):
    """A decision on data: records made up are data too, and the decision is checked on them
    and on the sets the check brings (the runs are 10.2's to vouch for)."""
    folder = study(tmp_path)
    path = folder / "records" / "sweep" / "lr-0.1.json"
    typed = json.loads(path.read_text())
    typed["losses"] = [2.30, 2.29, 2.28, 2.27, 2.26]
    path.write_text(json.dumps(typed))
    assert run_check("10.4", decide, folder).passed


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
    none = run_check("10.4", decide, runs.parent / "none")
    assert none.verdict == NOT_ATTEMPTED and "or on your jobs' results in sacct" in none.message


def test_10_4_decides_on_the_learners_jobs_results_in_sacct(sacct, tmp_path):
    sacct(*study_jobs())
    result = run_check("10.4", decide, tmp_path / "none", NAMED)
    assert result.passed, result.message
    assert result.evidence == "your study's jobs as data, read from sacct: 41, 42, 43, 44, 50"
    assert slurm_record._CLAIMED == {}  # read, not claimed: they stay 10.2's evidence

    def lowest_lr(records, sweep, work, deadline_hours):
        return decide(records, sweep, work, deadline_hours)[0], 0.02

    wrong = run_check("10.4", lowest_lr, None, NAMED)
    assert wrong.message == (
        "your own records and sweep: expected lr 0.1 (the lowest last loss), got 0.02"
    )


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
