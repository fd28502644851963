"""Run a learner's `thread_rates` on the lesson's training step, in a job: exercise 02.2's job.

    sbatch --parsable --export=ALL,COURSE_DIR=... runs/02/job/02.2-job.sh \\
        --answer runs/02/job/thread_rates_yours.py --digest 3f2a...

The step is lesson 02's: one SGD step of the lesson's Net on a batch of 256 synthetic images.
The learner's function measures it at every count of `cpu_sweep.counts` up to the CPUs the job
was given. The program runs it SWEEPS times and keeps each count's median
(`cpu_sweep.median_rates`): where other work shares the node, one sweep's 1-thread run can be
slowed while its 2-thread run is not, and a single sweep then shows more than 2 threads can give.
It prints the rates and, in a Slurm job, leaves them in the job's comment
(`witness.to_job_record`: "digest D rates 1:812.4,2:1490.0"), where the judge reads them.
"""

from __future__ import annotations

import torch

from course_utils import answer_jobs, cpu_sweep, hpc, models, witness
from course_utils.data import SyntheticCIFAR10, make_loader

BATCH = 256
SWEEPS = 3  # the learner's sweep, run this many times; each count's median is the job's rate


def lesson_step():
    """The lesson's training step: SGD on Net, one batch of 256 synthetic images."""
    torch.manual_seed(0)
    inputs, targets = next(iter(make_loader(SyntheticCIFAR10(size=BATCH), batch_size=BATCH)))
    model = models.Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train_step():
        optimizer.zero_grad()
        loss_fn(model(inputs), targets).backward()
        optimizer.step()

    return train_step


def main(argv=None) -> int:
    description = __doc__.splitlines()[0]
    thread_rates, digest = answer_jobs.program_arguments(
        answer_jobs.THREAD_SWEEP, description, argv
    )
    hpc.configure_threads()
    step = lesson_step()
    sweeps = [thread_rates(step, BATCH) for _ in range(SWEEPS)]
    try:
        rates = cpu_sweep.median_rates(sweeps)
        result = cpu_sweep.rates_text(rates)
    except (TypeError, ValueError) as e:
        print(f"thread_rates returned {sweeps[-1]!r}: expected {{threads: images per second}}")
        print(f"({e})")
        return 1
    print(f"the median of {SWEEPS} sweeps of your thread_rates:")
    for n, rate in sorted(rates.items()):
        print(f"{n} thread(s): {rate:8,.0f} images/s")
    print(f"allocated CPUs: {hpc.allocated_cpus()}")
    witness.to_job_record(f"digest {digest} rates {result}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
