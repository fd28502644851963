"""A learner's answer to exercise 05.3 written out as a learner would, shared by the check's fast
tests (tests/grading/checks/test_lesson05.py) and its run on emulated nodes
(tests/integration/test_checks_lesson05_ddp.py)."""


def ddp_header(job):
    hours, minutes = divmod(job["minutes"], 60)
    gpus = job["ranks_per_node"] * job["gpus_per_rank"]
    lines = [
        "#!/bin/bash",
        f"#SBATCH --nodes={job['nodes']}",
        f"#SBATCH --ntasks-per-node={job['ranks_per_node']}",
        f"#SBATCH --gres=gpu:{gpus}" if gpus else "",
        f"#SBATCH --cpus-per-task={job['cpus_per_rank']}",
        f"#SBATCH --mem={job['mem_gb_per_rank'] * job['ranks_per_node']}G",
        f"#SBATCH --time={hours:02d}:{minutes:02d}:00",
    ]
    return "\n".join(line for line in lines if line) + "\n"
