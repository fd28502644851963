"""slurm/checkpoint_requeue.sh on a real Slurm cluster: signal, checkpoint, requeue, exact resume.

The job is signalled mid-run as a preemption or the approaching time limit would
(`scancel --signal=USR1 --batch`); the batch shell forwards the signal to training, which saves,
runs `scontrol requeue` and exits; Slurm starts the job again (SLURM_RESTART_COUNT=1) and it
resumes. Its final parameters must equal those of an uninterrupted run, bit for bit.
"""

import os
import re
import subprocess

import pytest
from slurm_utils import REPO, submit, wait_for_text

from course_utils.fault_tolerance.resumable import Config, train

SCRIPT = "slurm/checkpoint_requeue.sh"
# 0.25 s per step leaves time to signal the job mid-run; the script passes --threads 2.
SETTINGS = dict(epochs=3, max_steps=24, save_every=3)
ARGS = ["--epochs", "3", "--max-steps", "24", "--save-every", "3", "--step-delay", "0.25"]


def test_script_asks_for_signal_and_requeue_and_forwards_the_signal():
    text = (REPO / SCRIPT).read_text()
    assert re.search(r"^#SBATCH --signal=B:USR1@\d+$", text, re.M)
    assert re.search(r"^#SBATCH --requeue$", text, re.M)
    assert re.search(r"^#SBATCH --open-mode=append$", text, re.M), "keep the first run's output"
    assert re.search(r"^source .*config\.sh\"$", text, re.M)
    assert re.search(r"^trap .*USR1$", text, re.M) and "pid=$!" in text and 'wait "$pid"' in text


@pytest.mark.slurm
def test_signalled_job_checkpoints_requeues_and_resumes_exactly(tmp_path):
    ckpt_dir = tmp_path / "ckpt"
    job = submit(SCRIPT, *ARGS, env={"CKPT_DIR": str(ckpt_dir)}, output_dir=tmp_path)
    job_id = wait_for_text(job.output_path, r"job (\d+) start \S+ restart 0", timeout=120)[1]
    wait_for_text(job.output_path, r"(?m)^step 6 ", timeout=120)
    subprocess.run(["scancel", "--signal=USR1", "--batch", job_id], check=True)
    result = job.wait(timeout=240)
    out = result.output
    assert result.returncode == 0, out
    assert "batch script: got SIGUSR1, forwarding it to training" in out
    stopped = re.search(r"got SIGUSR1 at step (\d+): checkpoint saved; job requeued", out)
    assert stopped, out
    assert f"job {job_id} start" in out.split(stopped[0])[1] and "restart 1" in out, out
    assert f"checkpoint: resumed from ckpt-{int(stopped[1]):08d}.pt" in out, out
    digest = re.search(r"final parameter hash: ([0-9a-f]{16}) \(step 24", out)
    assert digest, out
    reference = train(Config(ckpt_dir=str(tmp_path / "ref"), threads=2, **SETTINGS), log=len)
    assert digest[1] == reference, f"requeued job {digest[1]} != uninterrupted {reference}"
    assert os.path.isdir(ckpt_dir)
