"""Forged runs of lesson 09's run exercises, graded in the sandbox: none may earn a point
without a flag.

The classes of forged evidence a learner who has read the judge can produce, on 09.2 (the learner's
step run on real ranks), 09.3 (their repaired batch script run as a job) and 09.5 (their loader
measured):
- a typed-in result: what the run would return, computed in the kernel with no run at all
  (the mean of the losses, a hand-made `batch.Job` whose output holds the expected lines, the
  memory figures with the file's checksum read by NumPy);
- a rank that prints (or returns) the expected line and exits: ranks that return the mean
  they were handed without the collective, a program of the learner's own on local ranks that
  prints each rank's closing line, a reading of another loader than theirs.
Everything else in those notebooks is the released stub, so no honest point is there to earn.
"""

from __future__ import annotations

import textwrap

import pytest
from submissions import feedback, grade, with_answers

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

SCRIPT = '''
def repaired_script(broken):
    return """\\
#!/bin/bash
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --time=00:05:00
source "${COURSE_DIR:-.}/slurm/config.sh"
course_activate
course_master
srun python -m course_utils.jobs.faulty_ddp --timeout 20 "$@"
"""
'''

TYPED_IN = {  # results made in the kernel, no run
    "09.2": """
        def log_mean_loss(loss, rank, world_size):
            return None

        def run_step(losses):
            return [sum(losses) / len(losses)] + [None] * (len(losses) - 1)
        """,
    "09.3": SCRIPT
    + """
def run_repaired(script, folder, seed):
    lines = "".join(f"rank {r}: finished, seed {seed}, parameter sum 0.123456\\n" for r in (0, 1))
    return batch.Job("ddp-repaired", "local", 0, lines, 1.0)
""",
    "09.5": """
        import numpy as np

        def shared_loader(path, workers):
            return DataLoader(job_memory.ImageFile(path, mmap=True), batch_size=256,
                              num_workers=workers)

        def workers_memory(loader):
            total = int(np.load(loader.dataset.path).sum(dtype=np.int64))
            return {"own_mib": [9.0, 9.0], "checksum": total}
        """,
}
PRINTS_THE_LINE = {  # real processes that say what a healthy run says, without doing it
    "09.2": """
        def log_mean_loss(loss, rank, world_size):
            return None

        def run_step(losses):
            mean = sum(losses) / len(losses)
            return launching.run_ranks(lambda rank, size: mean if rank == 0 else None,
                                       len(losses), timeout=3.0)
        """,
    "09.3": SCRIPT
    + """
FAKE = '''
import os
if __name__ == "__main__":  # the fork server imports the module first
    seed = int(os.environ["SEED"])  # the references are not shown in a graded run: a sum made up
    print(f"rank {os.environ['RANK']}: finished, seed {seed}, parameter sum 0.123456")
'''


def run_repaired(script, folder, seed):
    Path("fake_rank.py").write_text(FAKE)
    return batch.local_run("fake", "fake_rank", [], batch.Shape(1, 2), environ={"SEED": str(seed)})
""",
    "09.5": """
        def shared_loader(path, workers):
            return DataLoader(job_memory.ImageFile(path), batch_size=256, num_workers=workers)

        def workers_memory(loader):
            other = DataLoader(job_memory.ImageFile(loader.dataset.path, mmap=True),
                               batch_size=256, num_workers=2)
            run = job_memory.read_loader(other)
            return {"own_mib": [p.unshared / 2**20 for p in run.workers],
                    "checksum": run.checksum}
        """,
}


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory):
    learners = {
        name: ("09", with_answers("09", {k: textwrap.dedent(v) for k, v in answers.items()}))
        for name, answers in {"typed_in": TYPED_IN, "prints_the_line": PRINTS_THE_LINE}.items()
    }
    options = ("--lesson", "09", "--seed", "7", "--timeout", "900", "--cell-timeout", "300")
    rows, out = grade(tmp_path_factory.mktemp("hostile09"), learners, *options)
    return rows, {name: feedback(out, name) for name in rows}


def test_forged_runs_earn_no_point_without_a_flag(gradebook):
    rows, feedback = gradebook
    assert set(rows) == {"typed_in", "prints_the_line"}
    for name, row in rows.items():
        assert row["status"] == "ok", row
        for ex_id in ("09.2", "09.3", "09.5"):
            assert row[ex_id] == "0" or ex_id in row["flags"], (name, ex_id, row)


def test_each_forgery_is_failed_for_what_it_lacks(gradebook):
    _, feedback = gradebook
    typed, printed = feedback["typed_in"], feedback["prints_the_line"]
    assert "expected a run of launching.run_ranks" in typed
    assert "a Job that no run of theirs made" in typed
    assert "expected your loader read by job_memory.read_loader" in typed
    assert "every rank entering the same collectives (all_reduce)" in printed
    assert "got fake_rank on 1 x 2" in printed
    assert "expected your loader read by job_memory.read_loader" in printed
