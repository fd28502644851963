"""Lesson 00 checkers: pass on the reference, fail with a useful message on known-wrong answers.

00.1's job is not run here: the learner's run_doctor_job is stood in for by one that returns the
job batch.run_script would (tests/integration/test_checks_lessons00_02_runs.py runs it for real,
and tests/integration/test_checks_lesson00_slurm.py on the test cluster)."""

import pytest
import torch

from course_utils import batch
from course_utils.doctor import gpu
from course_utils.grading import CheckFailed, run_check
from course_utils.grading.checks import lesson00
from course_utils.grading.probes import lesson00 as probes00


def _stub(*args):
    raise NotImplementedError


DOCTOR_JOB = """#!/bin/bash
#SBATCH --partition=alpha
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=7
#SBATCH --mem-per-cpu=800
#SBATCH --time=00:10:00
module load python/3.11
source ~/venvs/course/bin/activate
course doctor
"""


REPORT = f"""topic                 status   value
python                [ ok  ]  3.11.7
pytorch               [ ok  ]  {torch.__version__}
torchvision           [ ok  ]  0.29.1
slurm job             [info ]  not in a Slurm job (no SLURM_JOB_ID)
"""


def _ran(output=REPORT, launcher="local", job_id=None, code=0, state=None):
    """A run_doctor_job that returns the job batch.run_script would, running nothing."""
    return lambda script, folder: batch.Job("doctor", launcher, code, output, 1.0, job_id, state)


@pytest.fixture(autouse=True)
def here(monkeypatch):
    monkeypatch.setattr(probes00, "this_machine", lambda: {"partition": "debug", "setup": ""})


def _job(script, ran=None):
    """The two functions of 00.1: the script, whatever it is asked for, and its run."""
    return (lambda partition, setup: script), ran or _ran()


def test_doctor_job_passes_in_long_and_short_spellings():
    assert run_check("00.1", *_job(DOCTOR_JOB)).passed
    short = DOCTOR_JOB.replace("--partition=alpha", "-p alpha").replace("--ntasks=1", "-n 1")
    short = short.replace("--cpus-per-task=7", "-c 7").replace("--mem-per-cpu=800", "--mem=5600M")
    assert run_check("00.1", *_job(short.replace("course doctor", "srun course doctor"))).passed


def test_doctor_job_copied_from_the_session_fails_on_pty():
    pty = DOCTOR_JOB.replace("#SBATCH --time", "#SBATCH --pty\n#SBATCH --time")
    assert run_check("00.1", *_job(pty)).message == (
        "expected no --pty (srun's option for an interactive shell; sbatch has none), "
        "got #SBATCH --pty"
    )


def test_doctor_job_names_each_wrong_request():
    no_time = run_check("00.1", *_job(DOCTOR_JOB.replace("#SBATCH --time=00:10:00\n", "")))
    assert no_time.verdict == "failed" and no_time.message.endswith("got no --time")
    per_task = run_check("00.1", *_job(DOCTOR_JOB.replace("--mem-per-cpu=800", "--mem=800")))
    assert per_task.message == (
        f"the session `{'srun -p alpha --gres=gpu:1 -n 1 -c 7 --pty --mem-per-cpu=800 bash'}`: "
        "expected 5600 MB in all (--mem-per-cpu=800 for 7 CPUs, or --mem=5600M), got 800 MB"
    )
    no_gpu = run_check("00.1", *_job(DOCTOR_JOB.replace("#SBATCH --gres=gpu:1\n", "")))
    assert "expected one GPU (--gres=gpu:1), got 0 GPU(s)" in no_gpu.message
    long = run_check("00.1", *_job(DOCTOR_JOB.replace("00:10:00", "2:00:00")))
    assert long.message.endswith("got --time=2:00:00")


def test_doctor_job_with_options_after_a_command_fails():
    late = DOCTOR_JOB.replace(
        "#SBATCH --time=00:10:00\nmodule load python/3.11",
        "module load python/3.11\n#SBATCH --time=00:10:00",
    )
    assert run_check("00.1", *_job(late)).message == (
        "expected every #SBATCH line before the first command (sbatch stops reading options "
        "there), got '#SBATCH --time=00:10:00' after one"
    )


def test_doctor_job_body():
    no_shebang = run_check("00.1", *_job(DOCTOR_JOB.replace("#!/bin/bash\n", "")))
    assert no_shebang.message.startswith("expected a first line such as #!/bin/bash")
    not_active = DOCTOR_JOB.replace(
        "module load python/3.11\nsource ~/venvs/course/bin/activate\n", ""
    )
    assert "expected the environment activated before `course doctor`" in (
        run_check("00.1", *_job(not_active)).message
    )
    late = DOCTOR_JOB.replace("course doctor", "python train.py\ncourse doctor")
    assert run_check("00.1", *_job(late)).message.endswith("got 'python train.py' before it")
    shell = run_check("00.1", *_job(DOCTOR_JOB + "bash\n"))
    assert shell.message == "expected no interactive shell in a batch job, got the line 'bash'"
    forgot = run_check(
        "00.1", *_job(DOCTOR_JOB.replace("course doctor", "python -c 'import torch'"))
    )
    assert forgot.message.startswith("expected a line that runs `course doctor`")
    assert run_check("00.1", _stub, _ran()).verdict == "not attempted yet"
    assert (
        run_check("00.1", lambda partition, setup: None, _ran()).message
        == "expected the batch script as a string, got NoneType"
    )


def test_doctor_job_must_run_and_its_report_is_what_counts():
    def script(partition, setup):
        return DOCTOR_JOB.replace("partition=alpha", f"partition={partition}")

    unrun = run_check("00.1", script, lambda script, folder: None)
    assert unrun.verdict == "not attempted yet" and unrun.message.startswith("run your job first")
    typed = run_check("00.1", script, _ran("course doctor: all fine\n"))
    assert typed.verdict == "failed" and "`course doctor`'s report in the job's output" in (
        typed.message
    )
    other = run_check("00.1", script, _ran(REPORT.replace(torch.__version__, "2.3.0")))
    assert "the report of this environment" in other.message


SACCT = "41|doctor|{state}|0:0|00:00:06|7|5600M||00:03.1|{tres}|1|\n"
SLURM_REPORT = REPORT.replace("not in a Slurm job (no SLURM_JOB_ID)", "job 41 on cn1")


def test_a_doctor_job_on_slurm_is_held_against_sacct(fake_commands):
    def script(partition, setup):
        return DOCTOR_JOB.replace("partition=alpha", f"partition={partition}")

    tres = "billing=7,cpu=7,gres/gpu=1,mem=5600M,node=1"
    fake_commands({"sacct": SACCT.format(state="COMPLETED", tres=tres)})
    done = run_check("00.1", script, _ran(SLURM_REPORT, "slurm", "41"))
    assert done.passed, done.message
    fake_commands({"sacct": SACCT.format(state="FAILED", tres=tres)})
    failed = run_check("00.1", script, _ran(SLURM_REPORT, "slurm", "41"))
    assert failed.message == "expected job 41 COMPLETED in sacct, got FAILED"
    fake_commands({"sacct": SACCT.format(state="COMPLETED", tres="cpu=1,mem=2000M,node=1")})
    small = run_check("00.1", script, _ran(SLURM_REPORT, "slurm", "41"))
    assert small.message.startswith("expected at least 7 CPUs (a node that allocates whole")
    whole_cores = "billing=8,cpu=8,gres/gpu=1,mem=5600M,node=1"  # 7 CPUs rounded up to 4 cores
    fake_commands(
        {"sacct": SACCT.format(state="COMPLETED", tres=whole_cores).replace("|7|", "|8|")}
    )
    assert run_check("00.1", script, _ran(SLURM_REPORT, "slurm", "41")).passed
    elsewhere = run_check("00.1", script, _ran(REPORT, "slurm", "41"))
    assert elsewhere.message.startswith("expected the report of job 41 itself")


def test_a_pending_doctor_job_is_said_to_be_pending():
    def script(partition, setup):
        return DOCTOR_JOB.replace("partition=alpha", f"partition={partition}")

    note = "job 41 was still waiting in the queue after 600 s (reason: Priority); cancelled it"
    pending = run_check("00.1", script, _ran(note + "\n", "slurm", "41", 1, "PENDING"))
    assert pending.verdict == "not attempted yet", pending
    assert pending.message.startswith(f"your job 41 is pending: it did not start ({note})")
    assert "partition debug has room" in pending.message


def test_the_job_goes_to_the_courses_partition(monkeypatch, tmp_path):
    config = tmp_path / "config.sh"
    config.write_text("COURSE_PARTITION=${COURSE_PARTITION:-gpu}    # e.g. gpu\n")
    assert batch.site_partition({}, config) == "gpu"
    assert batch.site_partition({"COURSE_PARTITION": "a100"}, config) == "a100"
    assert batch.site_partition({}, batch.SITE_CONFIG) == ""  # the course's: the cluster default
    monkeypatch.undo()  # the real this_machine, with the course's setting
    monkeypatch.setenv("COURSE_PARTITION", "gpu-short")
    assert probes00.this_machine()["partition"] == "gpu-short"


def test_pairing():
    def reference(t, v):
        return int(t.split(".")[1]) + 15 == int(v.split(".")[1])

    assert run_check("00.2", reference).passed
    wrong = run_check("00.2", lambda t, v: True)
    assert wrong.message == "compatible('2.14.1', '0.24.1'): expected False, got True"
    assert run_check("00.2", _stub).verdict == "not attempted yet"


def pick_build(driver, capability, builds):
    version = tuple(int(p) for p in driver.split("."))
    for build in builds:
        need = gpu.MIN_DRIVER[int(build["cuda"].split(".")[0])]
        if version >= need and gpu.arch_supported(capability, build["arch_list"]):
            return build["tag"]
    return None


def test_pick_build():
    assert run_check("00.3", pick_build).passed


def test_pick_build_that_ignores_the_driver_fails():
    def arch_only(driver, capability, builds):
        return next(
            (b["tag"] for b in builds if gpu.arch_supported(capability, b["arch_list"])), None
        )

    assert run_check("00.3", arch_only).message == (
        "H100 with an older driver (driver 550.54.15, compute capability 9.0): "
        "expected 'cu128', got 'cu130'"
    )


def test_pick_build_with_exact_architectures_fails():
    def exact(driver, capability, builds):
        arch = f"sm_{capability[0]}{capability[1]}"
        version = tuple(int(p) for p in driver.split("."))
        for b in builds:
            if version >= gpu.MIN_DRIVER[int(b["cuda"][:2])] and arch in b["arch_list"]:
                return b["tag"]
        return None

    assert run_check("00.3", exact).message == (
        "L40S (driver 535.104.05, compute capability 8.9): expected 'cu128', got None"
    )


def test_pick_build_stub_and_newest_always():
    assert run_check("00.3", _stub).verdict == "not attempted yet"
    newest = run_check("00.3", lambda d, c, builds: builds[0]["tag"])
    assert newest.message.startswith("H100 with an older driver (driver 550.54.15")


def _records(**changes):
    """Records as import_cost.records makes them, from three imports in fresh processes."""
    cold = {"evicted_bytes": 2**30, "resident_before": 2**30 + 2**28, "resident_after": 2**28}
    samples = [
        {"state": "cold", **cold, "seconds": 2.4, "read_bytes": 2**28, "pid": 101},
        {"state": "warm", "evicted_bytes": 0, "seconds": 2.1, "read_bytes": 0, "pid": 102},
        {"state": "warm", "evicted_bytes": 0, "seconds": 2.0, "read_bytes": 4096, "pid": 103},
    ]
    measured = {"module": "torch", "python": "/env/bin/python", "measured_at": 1000.0}
    return {**measured, "samples": samples, **changes}


def test_import_records_from_fresh_processes_pass():
    message = lesson00.verify_import_records(_records(), "/env/bin/python", 999.0)
    assert message == "fresh imports of torch, cold first, records in runs/import_cost.json"


def test_where_the_cache_is_hidden_the_reads_from_storage_tell_cold_from_warm():
    hidden = _records()
    hidden["samples"][0]["evicted_bytes"] = None  # import_cost.cache_hidden: another's files
    assert lesson00.verify_import_records(hidden, "/env/bin/python", 999.0)
    assert lesson00.compare_cold_and_warm(hidden).startswith("the cold import read from storage")
    nothing = _records()
    nothing["samples"][0]["evicted_bytes"] = 0  # visible, and nothing was dropped
    with pytest.raises(CheckFailed, match="dropped cached pages of the package"):
        lesson00.verify_import_records(nothing, "/env/bin/python", 999.0)


def test_import_timed_inside_the_kernel_fails():
    in_kernel = _records()
    for s in in_kernel["samples"]:
        s["seconds"] = 2e-6  # `import torch` again in a process that has it: a dict lookup
    with pytest.raises(CheckFailed, match="torch was already imported in that process"):
        lesson00.verify_import_records(in_kernel, "/env/bin/python", 999.0)


def test_import_records_without_a_cold_start_or_from_elsewhere_fail():
    warm_only = _records()
    warm_only["samples"][0].update(state="warm", evicted_bytes=0)
    with pytest.raises(CheckFailed, match="one cold import first"):
        lesson00.verify_import_records(warm_only, "/env/bin/python", 999.0)
    not_evicted = _records()
    not_evicted["samples"][0]["evicted_bytes"] = 0
    with pytest.raises(CheckFailed, match=r"import_cost.evict\(...\) dropped"):
        lesson00.verify_import_records(not_evicted, "/env/bin/python", 999.0)
    with pytest.raises(CheckFailed, match="this environment's interpreter"):
        lesson00.verify_import_records(_records(python="/other/bin/python"), "/env/bin/python")
    with pytest.raises(CheckFailed, match="records from an earlier run"):
        lesson00.verify_import_records(_records(), "/env/bin/python", 2000.0)
    same_pid = _records()
    same_pid["samples"][2]["pid"] = 102
    with pytest.raises(CheckFailed, match="each import in a fresh process of its own"):
        lesson00.verify_import_records(same_pid, "/env/bin/python", 999.0)


def test_cold_against_warm_by_what_each_read_from_storage():
    assert lesson00.compare_cold_and_warm(_records()).startswith("the cold import read")
    not_cold = _records()
    not_cold["samples"][0]["read_bytes"] = 0  # imported before the eviction: all in memory
    with pytest.raises(CheckFailed, match="the cold import reading more from storage than the"):
        lesson00.compare_cold_and_warm(not_cold)
    disturbed = _records()
    disturbed["samples"][1]["read_bytes"] = 2**29  # another job dropped the pages meanwhile
    assert lesson00.compare_cold_and_warm(disturbed).startswith("the cold import read")
    swapped = _records()
    for warm in swapped["samples"][1:]:
        warm["read_bytes"] = 2**29  # every "warm" one read more than the cold one
    with pytest.raises(CheckFailed, match=r"the cold one read 268,435,456 bytes, a warm one"):
        lesson00.compare_cold_and_warm(swapped)
    uncounted = _records()
    uncounted["samples"][0]["read_bytes"] = -1  # a system without /proc/self/io
    assert lesson00.compare_cold_and_warm(uncounted).startswith("times only")


def test_import_cost_stub_and_missing_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_check("00.4", _stub).verdict == "not attempted yet"
    nothing = run_check("00.4", lambda path: None)
    assert nothing.verdict == "not attempted yet"
    assert nothing.message.startswith("run your measurement first: it saves no records")


# ---- held-out cases ------------------------------------------------------------------------


def test_00_2_held_out_cases_fail_a_table_of_the_visible_answers(held_out_catches):
    import re

    from course_utils.doctor.versions import torchvision_pairs

    visible = {
        ("2.14.1", "0.29.1"): True,
        ("2.11.0+cu130", "0.26.0+cu130"): True,
        ("2.6.0", "0.21.0"): True,
        ("2.14.1", "0.24.1"): False,
        ("2.9.1", "0.29.1"): False,
    }

    def table(torch_version, torchvision_version):  # right on every visible pair, and only there
        return visible.get((torch_version, torchvision_version), False)

    failure = held_out_catches("00.2", torchvision_pairs, table)
    pattern = r"compatible\('2\.\d+\.\d\S*', '0\.\d+\.\d\S*'\): expected True, got False"
    assert re.fullmatch(pattern, failure), failure


def test_00_3_s_cases_are_the_one_build_rules_answers():
    """The check asks gpu.build_verdict (lesson 07.3's rule too); its listed cases agree."""
    for _, driver, capability, want in lesson00.NODES:
        assert lesson00.newest_that_runs(driver, capability, lesson00.WHEELHOUSE) == want
    ptx_only = [{"tag": "cu128", "cuda": "12.8", "arch_list": ["sm_90", "compute_90"]}]
    assert lesson00.newest_that_runs("570.86.10", (12, 0), ptx_only) == "cu128"
    assert lesson00.newest_that_runs("560.35.03", (12, 0), ptx_only) is None  # PTX of 12.8
