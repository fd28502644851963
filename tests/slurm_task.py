"""One task of a two-node srun step (rank 3 of 4, the second on node cn2), as Slurm sets its
variables: the environment the tests of `course_utils.jobs.your_program` start the program in."""

SLURM_TASK = {
    "SLURM_JOB_ID": "4242",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "3",
    "SLURM_LOCALID": "1",
    "SLURM_NTASKS": "4",
    "SLURM_NODEID": "1",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_JOB_NODELIST": "cn[1-2]",
}
