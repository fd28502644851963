"""lab.your_jobs: the learner's jobs of lesson 10, written for them to submit (nothing here
submits), waited for without ever being cancelled, and read back from Slurm's record (canned
here in the shapes the CI cluster gives; tests/integration/test_grader_class.py submits them)."""

import pytest
from lab_fixtures import record

from course_utils import accounting, notebook_code
from course_utils.lab import cluster, run_records, scripts, your_jobs

SCRIPT = cluster.SCRIPTS["scaling"].read_text()


def stage_dataset(archive, environ):  # a function with a source, as a notebook cell gives one
    return environ["TMPDIR"]


def stub(*args):
    raise NotImplementedError("Exercise 10.k")


def test_the_staging_job_runs_the_learners_function_as_the_course_s_staging_script(tmp_path):
    written = your_jobs.staging_job(stage_dataset, tmp_path / "runs10")
    (job,) = written.submissions
    jobs = tmp_path / "runs10" / "jobs"
    module, runner = jobs / "stage_dataset_yours.py", jobs / "submit_staging.sh"
    assert written.files == (module, runner) and "def stage_dataset" in module.read_text()
    assert written.command == f"bash {runner}"
    words = job.argv()
    assert words[:2] == ["sbatch", "--parsable"] and str(cluster.SCRIPTS["staging"]) in words
    digest = notebook_code.digest(notebook_code.source(stage_dataset))
    assert words[words.index("--answer") + 1] == str(module)
    assert words[words.index("--digest") + 1] == digest
    assert words[words.index("--out") + 1] == str(jobs / "staging")
    assert f"--digest {digest}" in runner.read_text()
    assert runner.read_text().endswith('echo "STAGING_JOBS = [\\"$job1\\"]"\n')
    assert written.sbatch_lines().startswith("job1=$(submit --parsable --output=")
    assert "slurm/lab_staging.sh --data" in written.sbatch_lines()
    with pytest.raises(NotImplementedError):
        your_jobs.staging_job(stub, tmp_path / "runs10")


def test_the_study_chains_the_shapes_and_throttles_the_sweep(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    written = your_jobs.study_jobs(lambda: SCRIPT, tmp_path, lrs=(0.02, 0.1))
    *shapes, sweep = written.submissions
    assert [s.name for s in shapes] == ["1x1", "1x2", "1x4", "2x2"]
    assert [s.after for s in shapes] == [None, "1x1", "1x2", "1x4"]  # one after another
    assert (tmp_path / "jobs" / "lab_scaling_yours.sh").read_text() == SCRIPT
    assert "--gpus-per-node=4" in shapes[2].options and "--ntasks=4" in shapes[2].options
    assert shapes[1].argv("4210")[2] == "--dependency=afterany:4210"
    assert "--array=0-1%2" in sweep.options and sweep.args[-2:] == ("--lrs", "0.02,0.1")
    runner = (tmp_path / "jobs" / "submit_study.sh").read_text()
    assert written.command == f"bash {tmp_path / 'jobs' / 'submit_study.sh'}"
    assert '--dependency=afterany:"$job3"' in runner and "lab-2x2-" in runner
    assert f"COURSE_LAB_SCRIPT={cluster.digest(SCRIPT)}" in runner
    assert runner.rstrip().endswith('echo "STUDY_JOBS = [\\"$job1\\", \\"$job2\\", \\"$job3\\", '
                                    '\\"$job4\\", \\"$job5\\"]"')  # fmt: skip


def test_a_cpu_run_submits_the_scripts_cpu_variant_without_gpu_options(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    written = your_jobs.study_jobs(lambda: SCRIPT, tmp_path)
    variant = tmp_path / "jobs" / "lab_scaling_yours-cpu.sh"
    assert variant.read_text() == scripts.cpu_variant(SCRIPT)
    for s in written.submissions:
        assert s.script == variant and not any(o.startswith("--gpus") for o in s.options)


def test_a_study_needs_a_script(tmp_path):
    with pytest.raises(NotImplementedError):
        your_jobs.study_jobs(stub, tmp_path)
    with pytest.raises(TypeError, match="scaling_script\\(\\) returned NoneType: expected"):
        your_jobs.study_jobs(lambda: None, tmp_path)


def _queue(*answers):
    """squeue's successive answers ("" once the jobs left the queue), then the last forever."""
    said = list(answers)

    def answer(command):
        return said.pop(0) if len(said) > 1 else said[0]

    return answer


def _sacct(states: dict[str, str]):
    def answer(command):
        job = command[command.index("-j") + 1]
        state = states[job]
        return f"{job}|x|{state}|0:0|00:00:09|1|1G||00:01|cpu=1,mem=1G,node=1|1|\n"

    return answer


def test_a_wait_sees_pending_jobs_as_pending_and_ends_when_they_completed(fake_commands, capsys):
    fake = fake_commands(
        {
            "squeue": _queue(
                "7|RUNNING|None\n8|PENDING|Dependency\n",
                "8|PENDING|Priority\n",
                "8|RUNNING|None\n",
                "",
            ),
            "sacct": _sacct({"7": "COMPLETED", "8": "COMPLETED"}),
        }
    )
    assert your_jobs.wait([7, "8"], poll=0) == {"7": "COMPLETED", "8": "COMPLETED"}
    said = capsys.readouterr().out.splitlines()
    assert said[0] == "your jobs: 7 RUNNING, 8 PENDING (Dependency)"
    assert said[1] == "your jobs: 7 COMPLETED, 8 PENDING (Priority)"
    assert not any(c[0] == "scancel" for c in fake.calls)  # nothing is ever cancelled


def test_a_wait_ends_when_a_job_failed(fake_commands, capsys):
    fake_commands({"squeue": _queue("8|PENDING|Dependency\n"), "sacct": _sacct({"7": "FAILED"})})
    assert your_jobs.wait(["7", "8"], poll=0) == {"7": "FAILED", "8": "PENDING (Dependency)"}
    assert capsys.readouterr().out.splitlines()[-1] == "job 7 ended FAILED: its log says why"


def test_an_array_is_waited_for_through_its_tasks(fake_commands):
    fake_commands(
        {
            "squeue": _queue("9_0|RUNNING|None\n9_[1-2%2]|PENDING|JobArrayTaskLimit\n", ""),
            "sacct": _sacct({"9": "COMPLETED"}),
        }
    )
    assert your_jobs.wait(["9"], poll=0) == {"9": "COMPLETED"}


def test_an_interrupted_wait_leaves_the_jobs_in_the_queue_and_says_which(fake_commands, capsys):
    def interrupted(command):
        if len(fake.calls) > 1:
            raise KeyboardInterrupt
        return "8|PENDING|Resources\n"

    fake = fake_commands({"squeue": interrupted, "sacct": _sacct({"7": "COMPLETED"})})
    with pytest.raises(KeyboardInterrupt):
        your_jobs.wait(["7", "8"], poll=0)
    assert capsys.readouterr().out.splitlines()[-1] == (
        "stopped waiting; still in the queue, and left there: 8 PENDING (Resources) (squeue -u "
        "$USER shows them; scancel JOBID ends one)"
    )
    assert [c[0] for c in fake.calls] == ["squeue", "sacct", "squeue"]  # no scancel


def _comment(name, study="scaling", lr=0.05, throughput=1000.0):
    run = record(name, throughput, study=study, lr=lr)
    run["losses"] = [2.3, 2.2, 2.1, 2.0, 1.9]
    return "course:" + run_records.to_comment(run)


def test_the_study_reads_back_from_the_jobs_comments(fake_commands, monkeypatch):
    monkeypatch.setattr(accounting, "SETTLE_WAIT", 0)
    jobs = {"7": ("7", "COMPLETED", _comment("1x1")), "8": ("8", "FAILED", "")}
    jobs["9"] = ("9_0", "COMPLETED", _comment("lr-0.1", "sweep", 0.1))

    def steps(command):
        job, state, _ = jobs[command[command.index("-j") + 1]]
        return f"{job}|x|{state}|0:0|00:00:09|1|1G||00:01|cpu=1,mem=1G,node=1|1|\n"

    def owners(command):
        job, state, comment = jobs[command[command.index("-j") + 1]]
        ran = "2026-11-29T08:00:01|2026-11-29T08:00:10|cn1"
        return f"{job}|learner1|course|2026-11-29T08:00:00|{state}|{ran}|{comment}|sbatch x\n"

    fake_commands({"sacct --duplicates": owners, "sacct --batch-script": "", "sacct": steps})
    scaling, sweep, missing = your_jobs.study_from_sacct(["7", "8", "9"])
    assert [r["name"] for r in scaling] == ["1x1"] and scaling[0]["throughput"] == 1000.0
    assert scaling[0]["label"] == {
        "launcher": "slurm",
        "job": "7",
        "machine": "Slurm job 7 on cn1",
    }
    assert [(r["name"], r["label"]["job"]) for r in sweep] == [("lr-0.1", "9_0")]
    assert missing == ["job 8 FAILED: no result in its comment"]


def test_the_staging_jobs_results_are_its_own(tmp_path):
    folder = tmp_path / "jobs" / "staging"
    folder.mkdir(parents=True)
    for rank, job in ((0, "41"), (1, "41"), (2, "39")):
        (folder / f"rank{rank}.json").write_text(f'{{"rank": {rank}, "job": "{job}"}}')
    assert [r["rank"] for r in your_jobs.staging_results(41, tmp_path)] == [0, 1]
    assert your_jobs.staging_results(41, tmp_path / "none") == []
    (tmp_path / "jobs" / "logs").mkdir()
    (tmp_path / "jobs" / "logs" / "2x2-41.out").write_text("record 2x2\n")
    assert your_jobs.log_of("41", tmp_path) == "record 2x2\n"
    assert your_jobs.log_of("40", tmp_path) is None


def test_the_whole_record_a_job_wrote_is_shown_where_it_is_that_jobs(tmp_path):
    summary = run_records.from_comment(_comment("2x2")[len("course:") :])
    summary["label"] = {"launcher": "slurm", "job": "44"}
    assert your_jobs.written_record(summary, tmp_path) is summary  # none written here
    whole = record("2x2")
    whole["label"]["job"] = "44"
    run_records.save(whole, tmp_path / "jobs" / "records")
    assert your_jobs.written_record(summary, tmp_path) == whole
    summary["label"]["job"] = "45"  # another job's record: not this one's
    assert your_jobs.written_record(summary, tmp_path) is summary
