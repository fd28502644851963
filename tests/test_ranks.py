"""course_utils.ranks: the environment of a launch made from inside a job."""

from course_utils.ranks import DistEnv, local_launch_environ

# A kernel a centre's hub started in the batch script of a job with cores as tasks.
HUB_JOB = {
    "HOME": "/home/learner",
    "PATH": "/usr/bin",
    "CUDA_VISIBLE_DEVICES": "0",
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NAME": "jupyter",
    "SLURM_NTASKS": "4",
    "SLURM_NTASKS_PER_NODE": "4",
    "SLURM_PROCID": "0",
    "SLURM_JOB_NODELIST": "cn1",
    "SLURM_CPUS_ON_NODE": "4",
    "SLURM_MEM_PER_NODE": "8000",
    "PMI_RANK": "0",
    "RANK": "3",
    "WORLD_SIZE": "2",
    "LOCAL_RANK": "1",
    "MASTER_PORT": "12345",
    "TORCHELASTIC_RUN_ID": "old",
}


def test_a_local_launch_sets_aside_what_describes_the_job_and_keeps_the_rest():
    local = local_launch_environ(HUB_JOB)
    assert local.environ == {
        "HOME": "/home/learner",
        "PATH": "/usr/bin",
        "CUDA_VISIBLE_DEVICES": "0",  # the GPUs the job was given stay visible
        "SLURM_CPUS_ON_NODE": "4",  # the launch runs within the allocation's sizes
        "SLURM_MEM_PER_NODE": "8000",
    }
    assert "SLURM_NTASKS" in local.set_aside and "RANK" in local.set_aside
    assert "PMI_RANK" in local.set_aside and "TORCHELASTIC_RUN_ID" in local.set_aside
    # what the launched processes then read: rank 0 of 1, no job
    assert DistEnv.from_environ(local.environ) == DistEnv()


def test_the_note_is_one_line_naming_the_job_and_what_was_set_aside():
    note = local_launch_environ(HUB_JOB).note
    assert "\n" not in note
    assert note.startswith(
        "local launch: set aside SLURM_JOB_ID=4242, SLURM_NTASKS=4, SLURM_PROCID=0"
    )
    assert "of Slurm job 4242" in note and "more" in note


def test_outside_any_job_nothing_is_set_aside():
    local = local_launch_environ({"HOME": "/h", "SLURM_CPUS_PER_TASK": "2"})
    assert (local.environ, local.set_aside, local.note) == (
        {"HOME": "/h", "SLURM_CPUS_PER_TASK": "2"},
        (),
        "",
    )


def test_stale_torchrun_variables_alone_are_named_too():
    note = local_launch_environ({"RANK": "3", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}).note
    assert note.startswith("local launch: set aside RANK=3, LOCAL_RANK=1, WORLD_SIZE=2")
    assert "of the launch this process belongs to" in note
