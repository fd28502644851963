"""Run a learner's `name_the_bottleneck` on lesson 08's two training jobs, in a job: exercise
08.3's job, and the two jobs its check hands the function.

    sbatch --parsable --export=ALL,COURSE_DIR=... runs/08/job/08.3-job.sh \\
        --answer runs/08/job/name_the_bottleneck_yours.py --digest 3f2a...

One job is compute-bound (batches of 128 from memory), the other loader-bound (batches of 16,
each image read taking 8 ms, as a large JPEG from a slow disk would). The learner's function
profiles a few training steps of each, writes the trace and names the bottleneck; the program
reads each trace again (`profiling.loading_share`) and, in a Slurm job, leaves what it found in
the job's comment (`witness.to_job_record`: "digest D compute 0.04 compute loader 0.93
loader": each job's loading share and the function's answer), where the judge reads them.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

import torch

from course_utils import answer_jobs, data, profiling, throughput, witness

SLOW_READ = 8e-3  # seconds per image of the loader-bound job: 16 images, 128 ms per batch
# name: (batch size, seconds per image read)
PROFILE_JOBS = {"compute": (128, 0.0), "loader": (16, SLOW_READ)}


class CountedImages(torch.utils.data.Dataset):
    """A data set that counts its reads; each read sleeps `delay` seconds (a large JPEG)."""

    def __init__(self, dataset, delay: float = 0.0):
        self.dataset, self.delay, self.reads = dataset, delay, 0

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        self.reads += 1
        return self.dataset[i]


def profile_job(kind: str):
    """One of PROFILE_JOBS to profile on the CPU, its model warmed up by one step first
    (oneDNN's first call is slow): a fast loader (compute limits it) or one that takes about
    130 ms per batch of 16, many times the step's computation even on a busy machine (loading
    limits it). Returns (images, model, loader, optimizer); `images.reads` counts the reads."""
    batch, delay = PROFILE_JOBS[kind]
    images = CountedImages(data.SyntheticCIFAR10(train=True, size=256), delay)
    model, optimizer = throughput.build(throughput.NAIVE, "cpu")
    model(torch.randn(batch, 3, 32, 32)).sum().backward()
    optimizer.zero_grad(set_to_none=True)
    loader = torch.utils.data.DataLoader(images, batch_size=batch, shuffle=True)
    return images, model, loader, optimizer


@contextlib.contextmanager
def one_thread():
    """One torch thread while the jobs run: on a busy machine, threads that wait for each
    other at every operator make the computation's time swing by ten times and more."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def main(argv=None) -> int:
    description = __doc__.splitlines()[0]
    name_the_bottleneck, digest = answer_jobs.program_arguments(
        answer_jobs.BOTTLENECK, description, argv
    )
    found = []
    with tempfile.TemporaryDirectory() as tmp, one_thread():
        for kind in PROFILE_JOBS:
            _, model, loader, optimizer = profile_job(kind)
            trace = Path(tmp) / f"{kind}-bound.json"
            answer = name_the_bottleneck(model, loader, optimizer, trace)
            if not trace.is_file():
                print(f"the {kind}-bound job: no trace at trace_path: export the profile there")
                return 1
            share = profiling.loading_share(profiling.read_trace(trace))
            print(f"the {kind}-bound job: loading {share:.0%} of the loop, named {answer!r}")
            found.append(f"{kind} {share:.2f} {answer}")
    witness.to_job_record(f"digest {digest} " + " ".join(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
