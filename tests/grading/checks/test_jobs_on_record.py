"""The exercises graded on the learner's own job (00.1, 02.2, 05.3, 06.4, 08.3, 09.3): each
passes on Slurm's record of a right job and fails, with the reason, on a wrong one. Slurm's
answers are canned in the shapes the CI cluster gave (tests/integration/test_grader_class.py
grades a real class's jobs)."""

import pytest
from lesson05_answers import ddp_header

from course_utils import accounting, answer_jobs, ddp_jobs
from course_utils.failing import failures
from course_utils.grading import FAILED, CheckFailed, run_check
from course_utils.grading.checks import (
    answer_job_records,
    lesson05,
    lesson06_resume,
    lesson09_references,
    slurm_record,
)

DOCTOR = """#!/bin/bash
#SBATCH --job-name=doctor
#SBATCH --partition=debug
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=7
#SBATCH --mem-per-cpu=800
#SBATCH --time=00:10:00
source venv/bin/activate
course doctor
"""
REPAIRED = """#!/bin/bash
#SBATCH --job-name=ddp-repaired
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --time=00:05:00
set -euo pipefail
course_activate
srun python -m course_utils.jobs.faulty_ddp --timeout 20 "$@"
"""


def steps(job: str, cpus: int, nodes: int, step_tasks: int | None, state="COMPLETED") -> str:
    """sacct's lines of a job, the batch step and (with `step_tasks`) one srun step."""
    tres = f"cpu={cpus},gres/gpu=1,mem=4G,node={nodes}"
    lines = [
        f"{job}|x|{state}|0:0|00:00:09|{cpus}|4G||00:02.1|billing={cpus},{tres}|{nodes}|",
        f"{job}.batch|batch|{state}|0:0|00:00:09|{cpus}||210M|00:02.1|{tres}|1|1",
    ]
    if step_tasks:
        lines.append(
            f"{job}.0|python|{state}|0:0|00:00:08|{cpus}||99M|00:02|{tres}|{nodes}|{step_tasks}"
        )
    return "\n".join(lines) + "\n"


def owners(job: str, runs=("COMPLETED",), comment="", line="sbatch x.sh", step="") -> str:
    found = []
    for state in runs:
        ran = "2026-11-29T08:00:01|2026-11-29T08:00:10|cn1"  # Start, End, NodeList
        found.append(f"{job}|learner1|course|2026-11-29T08:00:00|{state}|{ran}|{comment}|{line}")
        found.append(f"{job}.0|||2026-11-29T08:00:00|{state}|{ran}||{step}")
    return "\n".join(found) + "\n"


@pytest.fixture
def slurm(fake_commands, monkeypatch):
    """Slurm answering with one job's record: slurm(job, steps, owners, script)."""
    monkeypatch.setattr(accounting, "SETTLE_WAIT", 0)
    monkeypatch.setattr(slurm_record, "slurm_answers", lambda: True)
    slurm_record.set_course(slurm_record.Course("learner1", "course"))

    def answer(sacct_steps: str, sacct_owners: str, script: str):
        stored = f"Batch Script for 1\n{'-' * 80}\n{script}"
        fake_commands(
            {
                "sacct --duplicates": sacct_owners,
                "sacct --batch-script": stored,
                "sacct": sacct_steps,
            }
        )

    yield answer
    slurm_record._COURSE.clear()
    slurm_record._CLAIMED.clear()


def doctor_job(partition, setup):
    return DOCTOR.replace("debug", partition).replace("source venv/bin/activate", setup)


def test_00_1_a_doctor_job_of_the_learner_s_passes_and_one_too_narrow_fails(slurm):
    slurm(steps("7", 7, 1, None), owners("7"), DOCTOR)
    passed = run_check("00.1", doctor_job, lambda *a: None, ["7"])
    assert passed.passed and passed.evidence.startswith("sacct 7: 1 node x 1 task, 7 CPUs")
    slurm(steps("8", 1, 1, None), owners("8"), DOCTOR)
    narrow = run_check("00.1", doctor_job, lambda *a: None, ["8"])
    assert "expected at least 7 CPUs" in narrow.message
    slurm(steps("9", 7, 1, None), owners("9"), DOCTOR.replace("course doctor", "python x.py"))
    other = run_check("00.1", doctor_job, lambda *a: None, ["9"])
    assert other.message.startswith("the script Slurm stored for job 9: ")


def test_09_3_the_repaired_job_s_result_is_reproduced(slurm):
    want = lesson09_references.trained_sum(5, world_size=2)
    good = owners("7", comment=f"course:seed 5 sum {want:.6f}", line="sbatch r.sh --seed 5")
    slurm(steps("7", 2, 1, 2), good, REPAIRED)
    passed = run_check("09.3", lambda broken: REPAIRED, lambda *a: None, ["7"])
    assert passed.passed, passed.message
    assert passed.evidence.endswith("its result reproduced")
    off = owners("7", comment=f"course:seed 5 sum {want + 1:.6f}", line="sbatch r.sh --seed 5")
    slurm(steps("7", 2, 1, 2), off, REPAIRED)
    assert (
        "expected the parameter sum of 3 steps"
        in run_check("09.3", lambda broken: REPAIRED, lambda *a: None, ["7"]).message
    )
    slurm(steps("7", 2, 1, 2), good, REPAIRED + "# mine\n")
    other = run_check("09.3", lambda broken: REPAIRED, lambda *a: None, ["7"])
    assert other.message == "job 7: expected your repaired script, as Slurm stored it, got another"
    assert failures.BROKEN_BATCH_SCRIPT  # the broken script the answer repaired


def test_05_3_the_ddp_job_s_result_is_reproduced(slurm):
    script = ddp_jobs.job_script(ddp_header(ddp_jobs.CPU_JOB.as_dict()))
    want = lesson05._one_process(5, 4 * lesson05.ddp_exercise.BATCH_SIZE)["sum"]
    record = owners("7", comment=f"course:seed 5 sum {want:.8f}", line="sbatch j.sh --seed 5")
    slurm(steps("7", 4, 2, 4), record, script)
    passed = run_check("05.3", ddp_header, lambda *a: None, ["7"])
    assert passed.passed, passed.message
    slurm(steps("7", 4, 2, 2), record, script)
    narrow = run_check("05.3", ddp_header, lambda *a: None, ["7"])
    assert "a step of 4 tasks on 2 nodes (srun)" in narrow.message
    apart = owners("7", comment=f"course:seed 5 sum {want + 0.5:.8f}", line="sbatch j.sh --seed 5")
    slurm(steps("7", 4, 2, 4), apart, script)
    assert (
        "1 process trained on the 4x batch"
        in run_check("05.3", ddp_header, lambda *a: None, ["7"]).message
    )


def test_06_4_a_requeued_job_that_resumed_exactly_passes(slurm):
    final = lesson06_resume.uninterrupted(11, 16, threads=2)
    step = "srun python -m course_utils.jobs.resumable_train --threads 2 --seed 11 --max-steps 16 "
    step += "--epochs 3"
    record = owners("7", ("REQUEUED", "COMPLETED"), f"course:hash {final} step 16", step=step)
    slurm(steps("7", 2, 1, 1), record, "#!/bin/bash\n")
    passed = run_check("06.4", lambda *a: None, ["7"])
    assert passed.passed, passed.message
    once = owners("7", ("COMPLETED",), f"course:hash {final} step 16", step=step)
    slurm(steps("7", 2, 1, 1), once, "#!/bin/bash\n")
    assert "got COMPLETED" in run_check("06.4", lambda *a: None, ["7"]).message
    other_threads = owners("7", ("REQUEUED", "COMPLETED"), f"course:hash {final} step 16",
                           step=step.replace("--threads 2", "--threads 1"))  # fmt: skip
    slurm(steps("7", 2, 1, 1), other_threads, "#!/bin/bash\n")
    assert "bitwise equal to the check's own" in run_check("06.4", lambda *a: None, ["7"]).message


# ---- 02.2 and 08.3: a learner's function run as their job (answer_jobs) ----------------------


def thread_rates(step, batch_size):  # the learner's cell, as the job's --digest names it
    return {}


def name_the_bottleneck(model, loader, optimizer, trace_path):
    return "compute"


def answer_record(slurm, job, fn, result, cpus=2, state="COMPLETED", script=None, digest=None):
    """Slurm's record of `job` run on `fn`: its digest on the command line, `result` left in
    its comment by the program."""
    digest = digest or answer_jobs.answer_digest(fn)
    line = f"sbatch --parsable {job.script_name} --answer a.py --digest {digest}"
    comment = f"course:digest {digest} {result}"
    slurm(
        steps("7", cpus, 1, 1, state), owners("7", (state,), comment, line), script or job.script()
    )
    return answer_jobs.answer_digest(fn)


def test_02_2_the_sweep_job_s_rates_cover_the_job_s_cpus(slurm):
    digest = answer_record(slurm, answer_jobs.THREAD_SWEEP, thread_rates, "rates 1:100.0,2:180.0")
    answer_job_records.thread_sweep("7", digest)  # passes: nothing raised
    slurm_record._CLAIMED.clear()
    # An honest sweep whose 1-thread run a shared node slowed (3.0x on 2 threads) passes too.
    answer_record(slurm, answer_jobs.THREAD_SWEEP, thread_rates, "rates 1:2389.0,2:7217.0")
    answer_job_records.thread_sweep("7", digest)
    slurm_record._CLAIMED.clear()
    answer_record(slurm, answer_jobs.THREAD_SWEEP, thread_rates, "rates 1:100.0,2:180.0", cpus=4)
    with pytest.raises(CheckFailed, match=r"expected rates at \[1, 2, 4\] thread\(s\), the counts"):
        answer_job_records.thread_sweep("7", digest)


@pytest.mark.parametrize(
    "change, said",
    [
        ({"result": "rates 1:100.0,2:900.0"}, "at most 2 x the 1-thread rate"),
        ({"result": "rates 1:100.0,2:401.0"}, "at most 2 x the 1-thread rate"),
        ({"result": "rates fast"}, "expected the rates the job measured"),
        ({"state": "FAILED"}, "expected a COMPLETED job"),
        ({"script": "#!/bin/bash\nsrun python mine.py\n"}, "the lesson's 02.2-job.sh"),
        ({"digest": "0123456789abcdef"}, "a run of another version"),
    ],
)
def test_02_2_a_job_that_is_not_the_sweep_earns_nothing(slurm, change, said):
    fields = {"result": "rates 1:100.0,2:180.0", **change}
    answer_record(slurm, answer_jobs.THREAD_SWEEP, thread_rates, **fields)
    got = run_check("02.2", thread_rates, ["7"])
    assert got.verdict == FAILED and said in got.message, got.message


def test_08_3_each_job_named_as_its_loading_share_says(slurm):
    good = "compute 0.04 compute loader 0.93 loader"
    digest = answer_record(slurm, answer_jobs.BOTTLENECK, name_the_bottleneck, good)
    answer_job_records.bottleneck("7", digest)
    for result, said in [
        ("compute 0.04 loader loader 0.93 loader", "expected 'compute' for the compute-bound"),
        ("compute 0.70 loader loader 0.93 loader", "the compute-bound job's profile"),
        ("compute", "each job's loading share and the name given"),
    ]:
        slurm_record._CLAIMED.clear()
        answer_record(slurm, answer_jobs.BOTTLENECK, name_the_bottleneck, result)
        with pytest.raises(CheckFailed, match=said):
            answer_job_records.bottleneck("7", digest)


def test_another_learner_s_job_earns_nothing(slurm):
    answer_record(slurm, answer_jobs.THREAD_SWEEP, thread_rates, "rates 1:100.0,2:180.0")
    slurm_record.set_course(slurm_record.Course("learner2", "course"))
    got = run_check("02.2", thread_rates, ["7"])
    assert "expected a job submitted by learner2, got one submitted by learner1" in got.message
