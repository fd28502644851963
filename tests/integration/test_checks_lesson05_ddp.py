"""Exercises 05.1 and 05.3 checked for real where the run itself is what is tested: ranks that
fail (their cause reported), 05.3's emulated nodes with a learner's wrong train_ddp, 05.3's job
on the CI Slurm cluster graded on sacct's record, and two forged submissions graded in the
sandbox. The judge's verdicts on wrong and forged runs are tested on injected records
(tests/grading/checks/test_lesson05.py, judge_ranks); the reference answers run in the
solutions lane."""

import os
import sys

import pytest
import torch
import torch.distributed as dist
from lesson05_answers import ddp_header
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from course_utils import accounting, batch
from course_utils.grading import run_check
from course_utils.grading.checks import lesson05


def train_ddp(model, dataset, batch_size, lr, steps):
    dist.init_process_group("gloo")
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    sampler.set_epoch(0)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    ddp = DDP(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    for step, (inputs, targets) in enumerate(loader):
        if step == steps:
            break
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(inputs), targets).backward()
        optimizer.step()
    return model


def no_ddp_wrap(model, dataset, batch_size, lr, steps):
    dist.init_process_group("gloo")
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step, (inputs, targets) in enumerate(loader):
        if step == steps:
            break
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
    return model


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/05 of the check goes here, as beside a notebook
    monkeypatch.setenv(batch.LAUNCHER_VARIABLE, "local")
    return tmp_path


def test_an_error_on_the_ranks_is_reported_with_its_cause(in_tmp):
    def broken(model, dataset, batch_size, lr, steps):
        raise RuntimeError("my loader is missing")

    result = run_check("05.1", broken)
    assert result.verdict == "failed" and "RuntimeError: my loader is missing" in result.message


def test_05_3_reports_the_learner_s_train_ddp_failing(in_tmp):
    result = run_check("05.3", ddp_header, no_ddp_wrap, seed=7)
    assert "train_ddp on 2 node(s) x 2 ranks" in result.message
    assert "wrap the model in DistributedDataParallel" in result.message


@pytest.mark.slurm
def test_05_3_on_the_ci_cluster_is_graded_on_sacct_s_record(in_tmp, monkeypatch):
    monkeypatch.setenv(batch.LAUNCHER_VARIABLE, "slurm")
    monkeypatch.setenv("COURSE_VENV", os.path.dirname(os.path.dirname(sys.executable)))
    result = run_check("05.3", ddp_header, train_ddp)
    assert result.passed, result.message
    assert result.message.startswith("[via slurm]")
    script = in_tmp / "runs" / "05" / "05.3-job.sh"
    out = next((in_tmp / "runs" / "05").glob("ddp-05-3-*.out"))
    job_id = out.stem.rsplit("-", 1)[1]
    ranks = [line for line in out.read_text().splitlines() if "parameter checksum" in line]
    assert sorted(line.split()[3] for line in ranks) == ["cn1:", "cn1:", "cn2:", "cn2:"]
    steps = accounting.ended_job_steps(job_id)
    assert any(s.is_step and s.tasks == 4 and s.nodes == 2 for s in steps), steps
    assert script.read_text().startswith(ddp_header(lesson05.CPU_JOB.as_dict()))


# ---- hostile submissions, graded in the sandbox ------------------------------------------------

HOSTILE = {
    # a rank prints the line the program would print, then leaves before the program does
    "prints_and_exits": {
        "05.1": """
            def train_ddp(model, dataset, batch_size, lr, steps):
                import os
                rank = os.environ.get("RANK", "0")
                print(f"rank {rank}/2 on vm: parameter checksum 0123456789abcdef", flush=True)
                os._exit(0)
            """,
    },
    # a warning the job's commands do not trap (bash dies of it): 05.1 honest (one point), 05.3
    # must fail
    "signal_untrapped": {
        "05.1": None,  # the solution's
        "05.3": None,
    },
}


def _hostile_notebook(name: str):
    import textwrap

    import nbformat

    from course_utils.grading.notebooks import course_meta
    from course_utils.paths import REPO_ROOT

    solution = nbformat.read(REPO_ROOT / "solutions" / "05_distributed_data_parallel.ipynb", 4)
    exercises = [c for c in solution.cells if course_meta(c).get("role") == "exercise"]
    answers = {course_meta(c)["exercise"]: c.source for c in exercises}
    nb = nbformat.read(REPO_ROOT / "notebooks" / "05_distributed_data_parallel.ipynb", 4)
    for cell in nb.cells:
        meta = course_meta(cell)
        if meta.get("role") != "exercise" or meta["exercise"] not in HOSTILE[name]:
            continue
        code = HOSTILE[name][meta["exercise"]]
        source = answers[meta["exercise"]] if code is None else textwrap.dedent(code)
        if name == "signal_untrapped" and meta["exercise"] == "05.3":
            time_line = 'f"#SBATCH --time={hours:02d}:{minutes:02d}:00",'
            assert time_line in source
            source = source.replace(time_line, f'{time_line} "#SBATCH --signal=B:USR1@60",')
        cell.source = source
    return nb


@pytest.fixture(scope="module")
def hostile_gradebook(tmp_path_factory):
    import csv

    import nbformat

    from course_utils.cli import main

    root = tmp_path_factory.mktemp("hostile05")
    (root / "subs").mkdir()
    for name in HOSTILE:
        nbformat.write(
            _hostile_notebook(name), root / "subs" / f"{name}__05_distributed_data_parallel.ipynb"
        )
    out = root / "out"
    argv = ["grade", str(root / "subs"), "--out", str(out), "-j", "2", "--seed", "5"]
    assert main([*argv, "--lesson", "05", "--timeout", "400", "--cell-timeout", "120"]) == 0
    with open(out / "gradebook.csv") as f:
        return {row["learner"]: row for row in csv.DictReader(f)}


@pytest.mark.bwrap
@pytest.mark.slow
def test_forged_runs_earn_nothing_in_the_sandbox(hostile_gradebook):
    rows = hostile_gradebook
    assert set(rows) == set(HOSTILE)
    forged = rows["prints_and_exits"]
    assert (forged["05.1"], forged["05.3"], forged["total"]) == ("0", "0", "0")
    assert "exits or kills the process" in forged["flags"]
    signal = rows["signal_untrapped"]
    assert (signal["05.1"], signal["05.3"], signal["flags"]) == ("1", "0", "")
