"""course_utils.failing.cluster_oom: the jobs as a learner types them, the kernel's lines of one
job, and the recorded run the lesson shows where there is no Slurm job (tests/integration/
test_failures_oom_slurm.py submits the jobs to a real cluster)."""

import re

from course_utils import processes
from course_utils.failing import cluster_oom, job_memory

DMESG = """\
[ 5631.966711] pt_data_worker invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
[ 5631.967225] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/slurm_cn1/uid_0/job_64,task_memcg=/slurm_cn1/uid_0/job_64/step_0/task_0,task=python,pid=18829,uid=0
[ 5631.967264] Memory cgroup out of memory: Killed process 18829 (python) total-vm:3545312kB, anon-rss:287476kB, file-rss:284848kB, shmem-rss:0kB, UID:0 pgtables:1976kB oom_score_adj:0
[ 5640.100000] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/slurm_cn1/uid_0/job_640,task_memcg=/slurm_cn1/uid_0/job_640/step_0/task_0,task=python,pid=777,uid=0
[ 5640.100100] Memory cgroup out of memory: Killed process 777 (python) total-vm:1kB, anon-rss:1kB, file-rss:1kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0
"""  # noqa: E501


def test_commands_read_as_a_learner_types_them():
    commands = {case.name: case.command() for case in cluster_oom.CASES}
    assert commands["copies"] == "sbatch --mem=1G slurm/loader_oom.sh --open copy"
    assert commands["one worker"] == ("sbatch --mem=1G slurm/loader_oom.sh --open copy --workers 1")
    assert commands["no srun"] == (
        "sbatch --mem=1G --wrap 'python -m course_utils.jobs.loader_memory --open copy; "
        'echo "exit code of python: $?"\''
    )


def test_kernel_lines_keep_only_the_jobs_own_kills():
    lines = cluster_oom.kernel_lines("64", DMESG)
    assert lines == (
        "Memory cgroup out of memory: Killed process 18829 (python) total-vm:3545312kB, "
        "anon-rss:287476kB, file-rss:284848kB, shmem-rss:0kB, UID:0 pgtables:1976kB "
        "oom_score_adj:0",
    )  # job 640's kill is another job's
    assert cluster_oom.kernel_lines("65", DMESG) == ()


def test_kernel_lines_leave_out_an_older_job_of_the_same_id():
    """A controller that starts afresh numbers its jobs from 1 again: the kernel's log still
    holds the kills of the older job 64, whose pids this job's output never named."""
    older = DMESG.replace("18829", "13636").replace("5631.", "1200.")
    output = "main process (pid 18829): 4 DataLoader workers read images.npy\n"
    pids = set(job_memory.announced_pids(output))
    assert pids == {"18829"}
    (line,) = cluster_oom.kernel_lines("64", older + DMESG, pids)
    assert "Killed process 18829 (python)" in line
    assert len(cluster_oom.kernel_lines("64", older + DMESG)) == 2  # by the job id alone


def test_kernel_lines_ask_dmesg_and_give_nothing_where_it_is_not_readable(monkeypatch):
    def refused(command, **kw):
        assert command == ["dmesg"]
        return processes.Finished(tuple(command), 1, "", "dmesg: read kernel buffer failed", 0.0)

    monkeypatch.setattr(processes, "run", refused)
    assert cluster_oom.kernel_lines("64") == ()


def test_the_recorded_run_shows_the_kill_and_each_fix():
    found = cluster_oom.recorded()
    assert re.match(
        r"recorded on the course's test cluster .*, node cn\d, Slurm 2\d\.\d+\.\d+, ", found.source
    )
    assert re.search(r"\d{4}-\d\d-\d\d, course commit [0-9a-f]{7}", found.source)
    runs = found.runs
    assert set(runs) == {case.name for case in cluster_oom.CASES}
    copies = runs["copies"]
    assert copies.report().oom_killed and copies.exit_code == 1
    assert copies.killed() and copies.killed()[0].startswith(("main process", "worker"))
    for fix in ("shares", "one worker", "more memory"):
        assert runs[fix].exit_code == 0 and not runs[fix].report().oom_killed
    no_srun = runs["no srun"]
    assert no_srun.exit_code == 1 and "exit code of python: 137" in no_srun.output
    assert no_srun.report().step.endswith(".batch")
    text = "".join(run.output + run.command for run in runs.values())
    assert not re.search(r"/work/|/tmp/|/root/", text)  # paths as a learner reads them


def test_for_lesson_outside_a_job_gives_the_recorded_run_and_says_so(monkeypatch, tmp_path):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    found = cluster_oom.for_lesson(tmp_path)
    assert found.source.startswith("no Slurm job here, so this is the run recorded on ")
    assert list(tmp_path.iterdir()) == []  # nothing run, nothing written


def test_for_lesson_in_a_job_runs_steps_and_falls_back_where_none_can_start(monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setattr(cluster_oom.shutil, "which", lambda name: f"/usr/bin/{name}")
    ran = {"copies": cluster_oom.JobRun("copies", "srun ...", 1, "", "task 0: Out Of Memory")}
    monkeypatch.setattr(cluster_oom, "run_in_job", lambda folder, timeout: ran)
    found = cluster_oom.for_lesson(tmp_path)
    assert found.source.startswith(
        "run now, as steps of job 4242; shares, one worker, more memory, no srun: the run "
        "recorded on "
    )
    assert found.runs["copies"] is ran["copies"] and found.runs["no srun"].exit_code == 1
    ran["shares"] = cluster_oom.JobRun("shares", "srun ...", None, "", "")  # never started
    found = cluster_oom.for_lesson(tmp_path)
    assert found.source.startswith(
        "job 4242 could not run shares as a step of its own, so this is the run recorded on "
    )
    assert found.runs["copies"].output != "task 0: Out Of Memory"  # the recorded run's
